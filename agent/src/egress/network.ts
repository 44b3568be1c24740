import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';
import { join } from 'node:path';
import { errorText } from '@gpufarm/shared';
import { addressRange, networkCidr } from '@gpufarm/shared/node';
import type Docker from 'dockerode';
import { RuntimeError } from '../job/errors.js';
import { ensureImage } from '../docker/image.js';
import { LABEL_ASSIGNMENT, LABEL_EGRESS, LABEL_JOB, LABEL_MANAGED, LABEL_OWNER } from '../docker/labels.js';
import { DockerLogParser, formatCursor, parseCursor, sinceSeconds, type LogCursor } from '../docker/log-lines.js';
import { EGRESS_CONFIG_ENV, EGRESS_PROXY_PORT, EGRESS_TEST_MODE_ENV, type EgressProxyConfig } from './config.js';
import { formatEgressEvent, parseEgressLine } from './events.js';

/**
 * The Docker side of an allowlist job: per job, a bridge network that is `Internal` and has no
 * host address (`com.docker.network.bridge.inhibit_ipv4`), so the job reaches neither the
 * host, nor other bridges, nor the internet; and the job's egress proxy container, attached to
 * that network (as `EGRESS_PROXY_ALIAS`) and to Docker's default bridge, which it reaches the
 * internet through. The job runs on the internal network with `HTTPS_PROXY`/`HTTP_PROXY` pointing at
 * the proxy and its DNS pointed at nothing (`JOB_DNS`): the only name it can resolve is the
 * proxy's. IPv6 stays off on both sides: the network is made without it (and refused if the
 * engine gave it some anyway, as a daemon whose default network options enable IPv6 would),
 * and the job's own IPv6 is switched off (`JOB_IPV6_OFF`), so no link-local address reaches
 * the host's side of the bridge. The proxy also refuses the host's own public networks
 * (`ownPublicNetworks`).
 *
 * Network and proxy carry the assignment's labels plus `LABEL_EGRESS` (`network` or `proxy`),
 * so a restarted agent finds them (`listEgress`) and removes those of jobs it no longer runs
 * (`reconcileEgress`). `removeEgress` is idempotent.
 */

/** The proxy's name on the job's network. */
export const EGRESS_PROXY_ALIAS = 'gf-egress';
/** The URL jobs get in `HTTPS_PROXY` and `HTTP_PROXY`. */
export const EGRESS_PROXY_URL = `http://${EGRESS_PROXY_ALIAS}:${EGRESS_PROXY_PORT}`;
/**
 * The job's DNS server: its own loopback, where nothing listens. Docker's embedded DNS still
 * answers the proxy's name, but forwards every other question there (Docker 20.10 forwards
 * questions from internal networks to the host's servers otherwise: a way to leak data).
 */
export const JOB_DNS = ['127.0.0.1'];
/**
 * Sysctls that switch IPv6 off in the job's network namespace, whatever the engine does:
 * without them a link-local address would reach the host's side of the job's bridge.
 */
export const JOB_IPV6_OFF: Readonly<Record<string, string>> = { 'net.ipv6.conf.all.disable_ipv6': '1', 'net.ipv6.conf.default.disable_ipv6': '1' };
/** Loopback stays direct: it is the job's own. */
export const JOB_NO_PROXY = 'localhost,127.0.0.1,::1';
/** The proxy container's limits (it relays bytes; node needs ~50 MiB). */
export const PROXY_MEMORY_BYTES = 256 * 1024 ** 2;
export const PROXY_NANO_CPUS = 1_000_000_000;
export const PROXY_PIDS_LIMIT = 64;
/** How long `startEgress` waits for the proxy to listen. */
export const PROXY_READY_TIMEOUT_MS = 15_000;

/** What an agent needs to run allowlist jobs. */
export interface EgressSettings {
  /** The proxy image, pinned (`repo@sha256:…`, built by scripts/build-images.sh). */
  image: string;
  /** Tunnels and bytes per job (defaults in server.ts). */
  maxConnections?: number;
  maxBytes?: number;
  /** Destination ports (default 443 and 80). */
  ports?: number[];
  /**
   * Tests only: allowlisted names the proxy maps to these addresses, unchecked (the proxy runs
   * in test mode). Production wiring never sets it.
   */
  testHosts?: Record<string, string>;
  /**
   * Tests only: entries of the proxy container's `/etc/hosts` (Docker's `ExtraHosts`). Unlike
   * `testHosts` they go through the proxy's real resolver and are checked like any DNS answer
   * (a test name that resolves to the metadata address must be refused).
   */
  testResolvedHosts?: Record<string, string>;
}

/** The egress objects of one running job. */
export interface EgressSetup {
  network: string;
  proxyContainerId: string;
  /** Env entries for the job (`HTTPS_PROXY=…`). */
  env: string[];
  /** The job container's sysctls (`JOB_IPV6_OFF`; none on a kernel without IPv6, where they do not exist). */
  sysctls: Record<string, string>;
}

/**
 * The host's own networks that are public by range, as CIDRs of their network prefix
 * (`203.0.113.0/24`, `2a01:4f8:1:2::/64`): its addresses and the LAN each sits on. Private,
 * loopback and link-local ones are left out: the proxy refuses those ranges anyway.
 */
export function ownPublicNetworks(interfaces: NodeJS.Dict<NetworkInterfaceInfo[]> = networkInterfaces()): string[] {
  const networks = new Set<string>();
  for (const list of Object.values(interfaces)) {
    for (const a of list ?? []) {
      if (a.internal || a.cidr === null || addressRange(a.address) !== null) continue;
      const network = networkCidr(a.address, Number(a.cidr.slice(a.cidr.lastIndexOf('/') + 1)));
      if (network !== null) networks.add(network);
    }
  }
  return [...networks].slice(0, 256);
}

/** Object names of an assignment's egress (stable, so a second create fails). */
export function egressName(owner: string, assignmentId: string): string {
  return `gf-egress-${owner}-${assignmentId}`.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 200);
}

/** The proxy variables a job gets, in both spellings (programs read one or the other). */
export function egressEnv(): string[] {
  return ['HTTPS_PROXY', 'HTTP_PROXY', 'https_proxy', 'http_proxy'].map((k) => `${k}=${EGRESS_PROXY_URL}`).concat([`NO_PROXY=${JOB_NO_PROXY}`, `no_proxy=${JOB_NO_PROXY}`]);
}

function labels(owner: string, assignmentId: string, jobId: string, role: 'network' | 'proxy'): Record<string, string> {
  return { [LABEL_MANAGED]: 'true', [LABEL_OWNER]: owner, [LABEL_ASSIGNMENT]: assignmentId, [LABEL_JOB]: jobId, [LABEL_EGRESS]: role };
}

/**
 * Creates the job's internal network and starts its proxy; resolves once the proxy listens.
 * On failure nothing stays behind.
 * @throws RuntimeError `create_failed` (Docker refused, the proxy did not come up), `pull_failed`.
 */
export async function startEgress(
  docker: Docker,
  settings: EgressSettings,
  job: { owner: string; assignmentId: string; jobId: string; allow: readonly string[] },
  progress: (line: string) => void,
): Promise<EgressSetup> {
  const name = egressName(job.owner, job.assignmentId);
  try {
    const image = await ensureImage(docker, settings.image, null, progress);
    const network = await docker.createNetwork({
      Name: name,
      Driver: 'bridge',
      Internal: true,
      // Said, not left to the daemon's defaults (newer engines may default to IPv6 on).
      EnableIPv6: false,
      CheckDuplicate: true,
      Options: { 'com.docker.network.bridge.inhibit_ipv4': 'true' },
      Labels: labels(job.owner, job.assignmentId, job.jobId, 'network'),
    });
    const info = (await network.inspect()) as { EnableIPv6?: boolean; IPAM?: { Config?: Array<{ Subnet?: string }> } };
    if (info.EnableIPv6 === true || info.IPAM?.Config?.some((c) => c.Subnet?.includes(':'))) {
      throw new Error('Docker gave the job\'s internal network IPv6 although asked not to; the job would reach the host over it');
    }
    const subnet = info.IPAM?.Config?.find((c) => c.Subnet && !c.Subnet.includes(':'))?.Subnet;
    const config: EgressProxyConfig = {
      allow: [...job.allow],
      ownNetworks: ownPublicNetworks(),
      ...(settings.ports ? { ports: settings.ports } : {}),
      ...(settings.maxConnections ? { maxConnections: settings.maxConnections } : {}),
      ...(settings.maxBytes ? { maxBytes: settings.maxBytes } : {}),
      ...(subnet ? { listenCidr: subnet } : {}),
      ...(settings.testHosts ? { testHosts: settings.testHosts } : {}),
    };
    const proxy = await docker.createContainer({
      name,
      Image: image.reference,
      Env: [`${EGRESS_CONFIG_ENV}=${JSON.stringify(config)}`, ...(settings.testHosts ? [`${EGRESS_TEST_MODE_ENV}=1`] : [])],
      Labels: labels(job.owner, job.assignmentId, job.jobId, 'proxy'),
      HostConfig: {
        NetworkMode: 'bridge',
        ReadonlyRootfs: true,
        CapDrop: ['ALL'],
        SecurityOpt: ['no-new-privileges'],
        Memory: PROXY_MEMORY_BYTES,
        MemorySwap: PROXY_MEMORY_BYTES,
        NanoCpus: PROXY_NANO_CPUS,
        PidsLimit: PROXY_PIDS_LIMIT,
        RestartPolicy: { Name: 'no' },
        LogConfig: { Type: 'json-file', Config: { 'max-size': '16m', 'max-file': '2' } },
        ...(settings.testResolvedHosts ? { ExtraHosts: Object.entries(settings.testResolvedHosts).map(([host, ip]) => `${host}:${ip}`) } : {}),
      },
    });
    // API 1.41 creates a container on one network; the job's is added before the start.
    await network.connect({ Container: proxy.id, EndpointConfig: { Aliases: [EGRESS_PROXY_ALIAS] } });
    await proxy.start();
    await waitListening(proxy);
    progress(`egress proxy ${proxy.id.slice(0, 12)} on network ${name} allows ${job.allow.join(', ')}${settings.testHosts ? ' (test mode)' : ''}`);
    return { network: name, proxyContainerId: proxy.id, env: egressEnv(), sysctls: existsSync('/proc/sys/net/ipv6/conf/all/disable_ipv6') ? { ...JOB_IPV6_OFF } : {} };
  } catch (err) {
    await removeEgress(docker, job.owner, job.assignmentId).catch(() => undefined);
    if (err instanceof RuntimeError) throw err;
    throw new RuntimeError('create_failed', `setting up the egress proxy failed: ${errorText(err)}`, { cause: err });
  }
}

/** Waits for the proxy's "listening" line; throws with its output when it exits or times out. */
async function waitListening(proxy: Docker.Container): Promise<void> {
  const deadline = Date.now() + PROXY_READY_TIMEOUT_MS;
  for (;;) {
    const text = ((await proxy.logs({ stdout: true, stderr: true, follow: false })) as unknown as Buffer).toString('latin1');
    if (text.includes('proxy listening on')) return;
    const state = (await proxy.inspect()).State;
    if (!state.Running) throw new Error(`the proxy exited (${state.ExitCode}): ${text.replace(/[^\x20-\x7e\n]/g, '').slice(-500)}`);
    if (Date.now() > deadline) throw new Error('the proxy did not listen in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The egress networks and proxies of an owner (optionally of one assignment). */
export async function listEgress(docker: Docker, owner: string, assignmentId?: string): Promise<{ proxies: Docker.ContainerInfo[]; networks: Docker.NetworkInspectInfo[] }> {
  const label = [`${LABEL_MANAGED}=true`, `${LABEL_OWNER}=${owner}`, LABEL_EGRESS, ...(assignmentId ? [`${LABEL_ASSIGNMENT}=${assignmentId}`] : [])];
  const [proxies, networks] = await Promise.all([docker.listContainers({ all: true, filters: { label } }), docker.listNetworks({ filters: { label } })]);
  return { proxies, networks };
}

/** Removes an assignment's proxy and network; nothing to remove is fine. */
export async function removeEgress(docker: Docker, owner: string, assignmentId: string): Promise<void> {
  const { proxies, networks } = await listEgress(docker, owner, assignmentId);
  for (const p of proxies) await ignoreMissing(docker.getContainer(p.Id).remove({ force: true, v: true }));
  for (const n of networks) await ignoreMissing(docker.getNetwork(n.Id).remove());
}

/**
 * After a restart: removes the egress of every assignment `keep` refuses (jobs that ended
 * while the agent was down, or that nobody owns). Returns the assignments cleaned.
 */
export async function reconcileEgress(docker: Docker, owner: string, keep: (assignmentId: string) => boolean): Promise<string[]> {
  const { proxies, networks } = await listEgress(docker, owner);
  const stale = new Set([...proxies.map((p) => p.Labels[LABEL_ASSIGNMENT] ?? ''), ...networks.map((n) => n.Labels?.[LABEL_ASSIGNMENT] ?? '')].filter((id) => !keep(id)));
  for (const id of stale) await removeEgress(docker, owner, id);
  return [...stale];
}

async function ignoreMissing(p: Promise<unknown>): Promise<void> {
  try {
    await p;
  } catch (err) {
    const code = (err as { statusCode?: number }).statusCode;
    if (code !== 404 && code !== 409) throw err;
  }
}

/** A follower of the proxy's decisions. */
export interface EgressLogFollower {
  /** Stops following at once; the proxy keeps running (the agent shuts down, a new one resumes). */
  detach(): Promise<void>;
  /** Stops the proxy, delivers its last lines (tunnels closed by the stop) and removes proxy and network. */
  finish(): Promise<void>;
}

/**
 * Follows the proxy's decision lines and hands each to `system` as the job's `system` line.
 * The position is kept in `<dir>/egress-cursor` after every line, so a restarted agent goes on
 * after the last line it delivered (at most one line twice, never one lost).
 */
export function followEgressLog(docker: Docker, job: { owner: string; assignmentId: string; dir: string }, system: (line: string) => void): EgressLogFollower {
  const cursorFile = join(job.dir, 'egress-cursor');
  let after: LogCursor | null = null;
  try {
    after = parseCursor(readFileSync(cursorFile, 'utf8').trim());
  } catch {
    // First start, or nothing delivered yet.
  }
  let stream: NodeJS.ReadableStream | null = null;
  let detached = false;
  const destroy = () => (stream as unknown as { destroy?: () => void } | null)?.destroy?.();
  const found = listEgress(docker, job.owner, job.assignmentId).then(
    ({ proxies: [proxy] }) => (proxy ? docker.getContainer(proxy.Id) : null),
    () => null,
  );
  const done = (async () => {
    const container = await found;
    if (!container) {
      system('egress: the proxy container is gone; the job reaches nothing');
      return;
    }
    if (detached) return;
    stream = (await container.logs({ follow: true, stdout: true, stderr: false, timestamps: true, ...(after ? { since: sinceSeconds(after) } : {}) })) as unknown as NodeJS.ReadableStream;
    if (detached) destroy();
    const parser = new DockerLogParser((_stream, text, cursor) => {
      const event = parseEgressLine(text);
      if (!event || detached) return;
      system(formatEgressEvent(event));
      try {
        writeFileSync(cursorFile, formatCursor(cursor));
      } catch {
        // The job's folder is gone (released): nothing will resume from it.
      }
    }, after);
    await new Promise<void>((resolve) => {
      stream!.on('data', (chunk: Buffer) => parser.push(chunk));
      stream!.on('end', () => resolve());
      stream!.on('error', () => resolve());
      stream!.on('close', () => resolve());
    });
    parser.end();
  })().catch(() => undefined);
  return {
    detach: async () => {
      detached = true;
      destroy();
      await done;
    },
    finish: async () => {
      // SIGTERM: the proxy ends its tunnels, logs them closed and exits; the follower then ends.
      const container = await found;
      if (container) await ignoreMissing(container.stop({ t: 5 }).then(() => undefined, (err: { statusCode?: number }) => (err.statusCode === 304 ? undefined : Promise.reject(err))));
      const timer = setTimeout(destroy, 5_000);
      await done;
      clearTimeout(timer);
      await removeEgress(docker, job.owner, job.assignmentId);
    },
  };
}

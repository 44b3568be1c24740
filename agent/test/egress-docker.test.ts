import { once } from 'node:events';
import { mkdtempSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import t, { type Test } from 'tap';
import type { AssignmentSpec } from '@gpufarm/shared';
import { egressName, listEgress, type EgressSettings } from '../src/egress/network.js';
import { execInContainer } from '../src/docker/exec.js';
import { DetachedError } from '../src/runtime/docker-runtime.js';
import { LABEL_OWNER } from '../src/docker/labels.js';
import { restoreJobs } from '../src/restore/restore.js';
import { busyboxSpec, collectLines, docker, localImages, testRuntime, uniqueName, waitFor } from './helpers/docker.js';

/**
 * Allowlist jobs on the real Docker Engine. Every target lives on this machine: allowlisted test
 * names are mapped by the proxy (test mode, `EgressSettings.testHosts`) to containers of this
 * test on Docker's default bridge; `private.example.com` is not mapped and resolves through
 * Docker's DNS to a container of this test on the job's network, a private address the proxy
 * must refuse. Checks run inside the job with `docker exec` (same namespaces and limits).
 */

const TEST_LABEL = 'org.gpufarm.test';


/** Removes this test's containers and networks (by owner and test label). */
async function clean(owner: string, tag: string): Promise<void> {
  for (const label of [`${LABEL_OWNER}=${owner}`, `${TEST_LABEL}=${tag}`]) {
    for (const c of await docker.listContainers({ all: true, filters: { label: [label] } })) {
      await docker.getContainer(c.Id).remove({ force: true, v: true }).catch(() => undefined);
    }
  }
  for (const label of [`${LABEL_OWNER}=${owner}`, `${TEST_LABEL}=${tag}`]) {
    for (const n of await docker.listNetworks({ filters: { label: [label] } })) await docker.getNetwork(n.Id).remove().catch(() => undefined);
  }
}

/** A busybox container of this test that answers every connection on port 80 with `text`. */
async function target(tag: string, text: string, network = 'bridge'): Promise<{ container: Docker.Container; ip: string }> {
  const container = await docker.createContainer({
    name: uniqueName(`gf-egress-target-${tag}`),
    Image: localImages().busybox.reference,
    Cmd: ['nc', '-ll', '-p', '80', '-e', 'echo', text],
    Labels: { [TEST_LABEL]: tag },
    HostConfig: { NetworkMode: network },
  });
  await container.start();
  const info = await container.inspect();
  return { container, ip: info.NetworkSettings.Networks[network]?.IPAddress ?? '' };
}


const connectVia = (target: string) => `printf 'CONNECT ${target} HTTP/1.1\\r\\n\\r\\n' | timeout 8 nc gf-egress 3128`;
const direct = (host: string, port: number) => `if timeout 5 nc -w 3 ${host} ${port} </dev/null >/dev/null 2>&1; then echo CONNECTED; else echo FAILED; fi`;

interface Fixture {
  owner: string;
  tag: string;
  settings: EgressSettings;
  allowed: { container: Docker.Container; ip: string };
}

async function fixture(t: Test): Promise<Fixture> {
  const owner = uniqueName('t');
  const tag = uniqueName('egress');
  t.teardown(() => clean(owner, tag));
  const allowed = await target(tag, 'hello-from-allowed');
  return {
    owner,
    tag,
    allowed,
    settings: {
      image: localImages().egressProxy.reference,
      testHosts: { 'allowed.example.com': allowed.ip },
      // Resolved by the proxy's own resolver (its /etc/hosts) and checked like any answer.
      testResolvedHosts: { 'metadata.example.com': '169.254.169.254', 'loopback.example.com': '127.0.0.1', 'v6local.example.com': 'fd00::1' },
    },
  };
}

function allowlistSpec(command: string, allow = ['allowed.example.com', 'private.example.com', 'metadata.example.com', 'loopback.example.com', 'v6local.example.com']): AssignmentSpec {
  return busyboxSpec({ command: ['sh', '-c', command], networkPolicy: { mode: 'allowlist', allow }, maxRuntimeSeconds: 120 });
}

t.test('behavior: an allowlist job reaches its names through the proxy and nothing else; proxy and network go when it ends', async (t) => {
  const f = await fixture(t);
  const runtime = testRuntime(t, { owner: f.owner, machine: { simulated: true, cpuCores: 2, ramBytes: 4 * 1024 ** 3, egress: f.settings } });
  const hostServer = createServer((s) => s.end('host-answer\n'));
  hostServer.listen(0, '0.0.0.0');
  await once(hostServer, 'listening');
  t.teardown(() => new Promise<void>((r) => hostServer.close(() => r())));
  const hostPort = (hostServer.address() as AddressInfo).port;

  const a = collectLines();
  const jobA = await runtime.start(allowlistSpec('sleep 300'), a.sink);
  const b = collectLines();
  const jobB = await runtime.start(allowlistSpec('nc -ll -p 8080 -e echo from-job-b & sleep 300'), b.sink);
  t.teardown(async () => {
    await jobA.cancel().catch(() => undefined);
    await jobB.cancel().catch(() => undefined);
  });

  const networkA = egressName(f.owner, jobA.assignmentId);
  const networkB = egressName(f.owner, jobB.assignmentId);
  const infoA = await docker.getContainer(jobA.containerId).inspect();
  const infoB = await docker.getContainer(jobB.containerId).inspect();
  t.same(Object.keys(infoA.NetworkSettings.Networks), [networkA], 'job A is on its own network only');
  t.match(infoA.Config.Env, [/^HTTPS_PROXY=http:\/\/gf-egress:3128$/], 'HTTPS_PROXY set');
  t.ok(infoA.Config.Env.includes('NO_PROXY=localhost,127.0.0.1,::1'));
  const ipB = infoB.NetworkSettings.Networks[networkB]?.IPAddress ?? '';
  t.match(ipB, /^\d+\.\d+\.\d+\.\d+$/);
  const netInfo = (await docker.getNetwork(networkA).inspect()) as { Internal: boolean; Options: Record<string, string> };
  t.equal(netInfo.Internal, true);
  t.equal(netInfo.Options['com.docker.network.bridge.inhibit_ipv4'], 'true');
  const { proxies } = await listEgress(docker, f.owner, jobB.assignmentId);
  const proxyB = await docker.getContainer(proxies[0]!.Id).inspect();
  const proxyBBridgeIp = proxyB.NetworkSettings.Networks.bridge?.IPAddress ?? '';

  // A name that resolves privately through real DNS (Docker's, for the proxy): a container on
  // job A's network under the alias private.example.com. Not in the test map.
  const privateTarget = await docker.createContainer({
    name: uniqueName(`gf-egress-private-${f.tag}`),
    Image: localImages().busybox.reference,
    Cmd: ['nc', '-ll', '-p', '80', '-e', 'echo', 'private-answer'],
    Labels: { [TEST_LABEL]: f.tag },
    HostConfig: { NetworkMode: networkA },
    NetworkingConfig: { EndpointsConfig: { [networkA]: { Aliases: ['private.example.com'] } } },
  });
  await privateTarget.start();

  await t.test('an allowed name is reached through the proxy', async (t) => {
    const out = await execInContainer(docker, jobA.containerId, connectVia('allowed.example.com:80'));
    t.match(out, /^HTTP\/1\.1 200 Connection Established\r\n\r\nhello-from-allowed/);
  });
  await t.test('a name not on the list is refused', async (t) => {
    t.match(await execInContainer(docker, jobA.containerId, connectVia('other.example.com:80')), /^HTTP\/1\.1 403 Forbidden[\s\S]*not_allowed/);
  });
  await t.test('an IP literal is refused', async (t) => {
    t.match(await execInContainer(docker, jobA.containerId, connectVia(`${f.allowed.ip}:80`)), /^HTTP\/1\.1 403 Forbidden[\s\S]*ip_literal/);
  });
  await t.test('a name resolving to a private address is refused', async (t) => {
    const out = await execInContainer(docker, jobA.containerId, connectVia('private.example.com:80'));
    t.match(out, /^HTTP\/1\.1 403 Forbidden[\s\S]*private_answer: the name resolves to \d+\.\d+\.\d+\.\d+ \(private network/);
    t.notMatch(out, /private-answer/);
  });
  await t.test('names resolving to the metadata, loopback or a private IPv6 address are refused', async (t) => {
    t.match(await execInContainer(docker, jobA.containerId, connectVia('metadata.example.com:80')), /^HTTP\/1\.1 403 Forbidden[\s\S]*private_answer: the name resolves to 169\.254\.169\.254 \(the cloud metadata address\)/);
    t.match(await execInContainer(docker, jobA.containerId, connectVia('loopback.example.com:80')), /^HTTP\/1\.1 403 Forbidden[\s\S]*127\.0\.0\.1 \(loopback\)/);
    t.match(await execInContainer(docker, jobA.containerId, connectVia('v6local.example.com:80')), /^HTTP\/1\.1 403 Forbidden[\s\S]*fd00::1 \(unique local/);
  });
  await t.test('a port off the list is refused', async (t) => {
    t.match(await execInContainer(docker, jobA.containerId, connectVia('allowed.example.com:8080')), /^HTTP\/1\.1 403 Forbidden[\s\S]*port/);
  });

  await t.test('direct connections that skip the proxy fail', async (t) => {
    const hostAddresses = Object.values(networkInterfaces()).flat().filter((a) => a && a.family === 'IPv4').map((a) => a!.address);
    t.ok(hostAddresses.includes('127.0.0.1'));
    const targets: [string, string, number][] = [
      ...hostAddresses.filter((ip) => ip !== '127.0.0.1').map((ip): [string, string, number] => [`the host at ${ip}`, ip, hostPort]),
      ['the allowed target on the default bridge', f.allowed.ip, 80],
      ['job B on its network', ipB, 8080],
      ['job B\'s proxy on the default bridge', proxyBBridgeIp, 3128],
    ];
    const results = await Promise.all(targets.map(([, ip, port]) => execInContainer(docker, jobA.containerId, direct(ip, port))));
    targets.forEach(([what], i) => t.equal(results[i]!.trim(), 'FAILED', what));
    // The job's bridge has an IPv6 link-local address on the host; the job has no IPv6 at all.
    t.equal((await execInContainer(docker, jobA.containerId, 'cat /proc/sys/net/ipv6/conf/all/disable_ipv6; wc -c < /proc/net/if_inet6')).trim().split(/\s+/).join(' '), '1 0', 'no IPv6 in the job');
    // A proxy listens on its job's network only: from the default bridge it is not a proxy.
    t.equal((await execInContainer(docker, f.allowed.container.id, direct(proxyBBridgeIp, 3128))).trim(), 'FAILED', 'job B\'s proxy from the default bridge');
    // Control: the same check from a container on the default bridge reaches the host's port.
    const gateway = hostAddresses.find((ip) => ip.startsWith('172.17.')) ?? '172.17.0.1';
    t.equal((await execInContainer(docker, f.allowed.container.id, direct(gateway, hostPort))).trim(), 'CONNECTED', 'the check can tell: the host port answers a normal bridge');
  });

  await t.test('DNS inside the job answers only the proxy\'s name', async (t) => {
    const out = await execInContainer(docker, jobA.containerId, 'for n in gf-egress allowed.example.com example.com registry-1.docker.io ' + `${jobB.containerId.slice(0, 12)} ${egressName(f.owner, jobB.assignmentId)}; do if nslookup $n 2>/dev/null | grep -q "^Name:"; then echo "$n RESOLVED"; else echo "$n NOTHING"; fi; done`);
    t.match(out, /gf-egress RESOLVED/);
    for (const name of ['allowed.example.com', 'example.com', 'registry-1.docker.io']) t.match(out, new RegExp(`${name.replace(/\./g, '\\.')} NOTHING`), name);
    t.notMatch(out.replace(/^gf-egress RESOLVED$/m, ''), /RESOLVED/, out);
  });

  await t.test('two allowlist jobs running at once cannot reach each other', async (t) => {
    const ipA = infoA.NetworkSettings.Networks[networkA]?.IPAddress ?? '';
    t.equal((await execInContainer(docker, jobA.containerId, direct(ipB, 8080))).trim(), 'FAILED', 'A to B');
    t.equal((await execInContainer(docker, jobB.containerId, direct(ipA, 8080))).trim(), 'FAILED', 'B to A');
    t.match(await execInContainer(docker, jobB.containerId, 'nc -w 2 127.0.0.1 8080 </dev/null'), /from-job-b/, 'B\'s server answers inside B');
    t.match(await execInContainer(docker, jobB.containerId, connectVia(`${ipA}:80`)), /403[\s\S]*ip_literal/, 'nor through B\'s proxy');
  });

  await t.test('each decision is a system line of the job, with bytes when a tunnel closes', async (t) => {
    await waitFor(() => a.of('system').some((l) => l.startsWith('egress closed allowed.example.com:80')));
    const lines = a.of('system').filter((l) => l.startsWith('egress'));
    t.match(lines.join('\n'), /egress allowed allowed\.example\.com:80 \(connection 1 to \d+\.\d+\.\d+\.\d+\)/);
    t.match(lines.join('\n'), /egress closed allowed\.example\.com:80 \(connection 1\): \d+ bytes sent, 19 bytes received/);
    t.match(lines.join('\n'), /egress refused other\.example\.com:80 \(not_allowed\)/);
    t.match(lines.join('\n'), /egress refused \d+\.\d+\.\d+\.\d+:80 \(ip_literal\)/);
    t.match(lines.join('\n'), /egress refused private\.example\.com:80 \(private_answer\)/);
    t.notOk(b.of('system').some((l) => l.includes('other.example.com')), 'job B\'s log has only its own decisions');
  });

  await privateTarget.remove({ force: true });
  await jobA.cancel();
  await jobA.done;
  t.same(await listEgress(docker, f.owner, jobA.assignmentId), { proxies: [], networks: [] }, 'job A\'s proxy and network are gone once it ended');
  t.equal((await listEgress(docker, f.owner, jobB.assignmentId)).proxies.length, 1, 'job B\'s are still there');
  await jobB.cancel();
  await jobB.done;
  t.same(await listEgress(docker, f.owner), { proxies: [], networks: [] });
});

t.test('behavior: an agent restart mid-job keeps the network and proxy working; nothing is left after the job ends', async (t) => {
  const f = await fixture(t);
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-runtime-'));
  const machine = { simulated: true, cpuCores: 2, ramBytes: 4 * 1024 ** 3, egress: f.settings };
  const first = testRuntime(t, { owner: f.owner, stateDir, machine });
  const before = collectLines();
  // The job ends by itself once /tmp/stop exists.
  const job = await first.start(allowlistSpec('until [ -e /tmp/stop ]; do sleep 0.2; done'), before.sink);
  t.match(await execInContainer(docker, job.containerId, connectVia('allowed.example.com:80')), /200 Connection Established\r\n\r\nhello-from-allowed/);
  await waitFor(() => before.of('system').some((l) => l.startsWith('egress closed')));
  await job.detach();
  await t.rejects(job.done, DetachedError);

  // While no agent runs, the job still reaches its names, and a refusal is logged by the proxy.
  t.match(await execInContainer(docker, job.containerId, connectVia('other.example.com:80')), /403/);

  const second = testRuntime(t, { owner: f.owner, stateDir, machine });
  const after = collectLines();
  const restored = await restoreJobs(second, { sinkFor: () => after.sink });
  t.equal(restored.jobs.length, 1);
  t.same(restored.removed, [], 'the proxy is not taken for a stray container');
  const egress = await listEgress(docker, f.owner, job.assignmentId);
  t.equal(egress.proxies.length, 1);
  t.equal(egress.networks.length, 1);
  t.match(await execInContainer(docker, job.containerId, connectVia('allowed.example.com:80')), /200 Connection Established\r\n\r\nhello-from-allowed/, 'the proxy still works after the restart');
  await waitFor(() => after.of('system').filter((l) => l.startsWith('egress closed')).length >= 1);
  const resumedEgress = after.of('system').filter((l) => l.startsWith('egress '));
  t.match(resumedEgress.join('\n'), /egress refused other\.example\.com:80 \(not_allowed\)/, 'the decision made while the agent was down reaches the log');
  t.notMatch(resumedEgress.join('\n'), /connection 1\)/, 'lines delivered before the restart are not delivered again');

  await execInContainer(docker, job.containerId, 'touch /tmp/stop');
  const exit = await restored.jobs[0]!.done;
  t.equal(exit.exitCode, 0);
  t.same(await listEgress(docker, f.owner), { proxies: [], networks: [] }, 'no proxy or network left once the job ended');
});

t.test('behavior: a restart after the job ended while the agent was down removes its proxy and network', async (t) => {
  const f = await fixture(t);
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-runtime-'));
  const machine = { simulated: true, cpuCores: 2, ramBytes: 4 * 1024 ** 3, egress: f.settings };
  const first = testRuntime(t, { owner: f.owner, stateDir, machine });
  const job = await first.start(allowlistSpec('sleep 300'), collectLines().sink);
  await job.detach();
  await t.rejects(job.done, DetachedError);
  const second = testRuntime(t, { owner: f.owner, stateDir, machine });
  // The control plane no longer wants the assignment: its container and egress go.
  const restored = await restoreJobs(second, { sinkFor: () => collectLines().sink, owns: () => false });
  t.same(restored.jobs, []);
  t.same(restored.removed, [job.containerId]);
  t.same(await listEgress(docker, f.owner), { proxies: [], networks: [] });
});

t.test('error: without egress settings an allowlist job is refused as unsupported', async (t) => {
  const runtime = testRuntime(t);
  await t.rejects(runtime.start(allowlistSpec('true'), collectLines().sink), { name: 'ContainerConfigError', code: 'unsupported' });
});

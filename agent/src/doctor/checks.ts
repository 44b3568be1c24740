import { existsSync, statSync, statfsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type Docker from 'dockerode';
import type { GpuInventory } from '@gpufarm/shared';
import type { DriverHostReader } from '../inventory/driver-host.js';
import type { GpuReader } from '../inventory/gpu-reader.js';
import { preOfferChecks, type PreOfferCheck } from '../inventory/pre-offer.js';
import { gpusFromReading } from '../inventory/snapshot.js';
import { errorText } from '@gpufarm/shared';

/** One doctor finding: what was checked, what was seen, and how to fix it when it is not ok. */
export type DoctorCheck = PreOfferCheck;

export interface DoctorDeps {
  docker: Docker;
  /** Where the Docker client connects, for messages (`/var/run/docker.sock` or DOCKER_HOST). */
  dockerEndpoint: string;
  gpus: GpuReader;
  /** The driver's host facts for the pre-offer checks; absent, they run on nvidia-smi's output alone. */
  driverHost?: DriverHostReader;
  fetch: typeof fetch;
  now: () => Date;
}

export interface DoctorOptions {
  server: string | null;
  workDir: string;
  minFreeDiskBytes: number;
  simulated: boolean;
  /** Largest clock difference to the control plane that passes. */
  maxSkewMs?: number;
  /** Oldest Docker Engine API the runtime supports. */
  minDockerApi?: string;
}

const MIN_API = '1.41';

function apiAtLeast(version: string, min: string): boolean {
  const [a = 0, b = 0] = version.split('.').map(Number);
  const [c = 0, d = 0] = min.split('.').map(Number);
  return a > c || (a === c && b >= d);
}

const gib = (n: number) => `${(n / 1024 ** 3).toFixed(1)} GiB`;

/**
 * Checks what the agent needs on this machine and says how to fix what is missing: the Docker
 * socket and Engine API version, nvidia-smi and the driver, which GPUs are offered (and why
 * not), the pre-offer checks (driver libraries, fabric manager, persistence mode), the NVIDIA
 * container runtime, free
 * disk for job outputs, the clock against the control plane's `Date` header, and whether the
 * control plane answers at all. Never throws: each failure is a finding.
 */
export async function runDoctor(deps: DoctorDeps, options: DoctorOptions): Promise<DoctorCheck[]> {
  const checks: DoctorCheck[] = [];
  const minApi = options.minDockerApi ?? MIN_API;

  // Docker socket and API
  const socketPath = deps.dockerEndpoint.startsWith('/') ? deps.dockerEndpoint : null;
  let dockerUp = false;
  try {
    await deps.docker.ping();
    dockerUp = true;
    checks.push({ name: 'docker socket', status: 'ok', detail: `Docker Engine answers at ${deps.dockerEndpoint}`, fix: null });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const missing = socketPath !== null && !existsSync(socketPath);
    checks.push({
      name: 'docker socket',
      status: 'fail',
      detail: missing ? `no socket at ${socketPath}` : `Docker Engine at ${deps.dockerEndpoint} does not answer (${code ?? errorText(err)})`,
      fix: missing
        ? 'install and start Docker Engine: "apt-get install -y docker.io && systemctl enable --now docker" (or set DOCKER_HOST)'
        : code === 'EACCES'
          ? 'run the agent as root or add its user to the "docker" group'
          : 'start Docker Engine: "systemctl start docker"; check "journalctl -u docker"',
    });
  }
  let runtimes: string[] = [];
  if (dockerUp) {
    try {
      const v = await deps.docker.version();
      const api = v.ApiVersion ?? '0';
      checks.push(apiAtLeast(api, minApi)
        ? { name: 'docker api version', status: 'ok', detail: `Engine ${v.Version}, API ${api} (needs ${minApi} or newer)`, fix: null }
        : { name: 'docker api version', status: 'fail', detail: `Engine ${v.Version}, API ${api}: older than ${minApi}`, fix: 'upgrade Docker Engine to 20.10 or newer' });
      const info = (await deps.docker.info()) as { Runtimes?: Record<string, unknown>; DefaultRuntime?: string };
      runtimes = Object.keys(info.Runtimes ?? {});
    } catch (err) {
      checks.push({ name: 'docker api version', status: 'fail', detail: `version query failed: ${errorText(err)}`, fix: 'check that the Docker Engine is healthy: "docker version"' });
    }
  } else {
    checks.push({ name: 'docker api version', status: 'skip', detail: 'Docker Engine not reachable', fix: null });
  }

  // nvidia-smi and the container runtime
  const reading = await deps.gpus.read();
  if (reading.ok && reading.report.gpus.length > 0) {
    const names = [...new Set(reading.report.gpus.map((g) => g.name))].join(', ');
    checks.push({ name: 'nvidia-smi', status: 'ok', detail: `${reading.report.gpus.length} GPU(s): ${names}; driver ${reading.report.driverVersion}, CUDA ${reading.report.cudaVersion}`, fix: null });
  } else {
    const detail = reading.ok ? 'nvidia-smi runs but lists no GPU' : reading.reason;
    const fix = options.simulated
      ? null
      : reading.ok || !reading.missing
        ? 'check the driver: "nvidia-smi" should list the GPUs; reload the driver or reboot after a driver upgrade'
        : 'install the NVIDIA driver (Debian: "apt-get install -y nvidia-driver" from non-free, then reboot); on a machine without GPUs run with --simulate-gpus "1x rtx-4090-24gb"';
    checks.push({ name: 'nvidia-smi', status: options.simulated ? 'skip' : 'fail', detail: options.simulated ? `${detail} (simulated mode does not need it)` : detail, fix });
  }
  if (reading.ok && reading.report.gpus.length > 0) checks.push(gpuSupportCheck(gpusFromReading(reading)));
  // The pre-offer checks, as the daemon judges them: a failed one keeps the GPUs off the market.
  if (options.simulated) {
    for (const name of ['driver libraries', 'fabric manager', 'persistence mode']) checks.push({ name, status: 'skip', detail: 'simulated mode', fix: null });
  } else {
    const host = (await deps.driverHost?.read({ fabricAttached: reading.ok && reading.report.gpus.some((g) => g.health.fabric !== null) })) ?? null;
    checks.push(...preOfferChecks(reading, host));
  }
  if (!dockerUp) {
    checks.push({ name: 'nvidia container runtime', status: 'skip', detail: 'Docker Engine not reachable', fix: null });
  } else if (runtimes.includes('nvidia')) {
    checks.push({ name: 'nvidia container runtime', status: 'ok', detail: `Docker lists the "nvidia" runtime (runtimes: ${runtimes.join(', ')})`, fix: null });
  } else {
    checks.push({
      name: 'nvidia container runtime',
      status: options.simulated ? 'skip' : 'fail',
      detail: `Docker has no "nvidia" runtime (runtimes: ${runtimes.join(', ') || 'none'})${options.simulated ? '; simulated mode does not need it' : ''}`,
      fix: options.simulated ? null : 'install the NVIDIA Container Toolkit ("apt-get install -y nvidia-container-toolkit" from NVIDIA\'s repository), run "nvidia-ctk runtime configure --runtime=docker" and "systemctl restart docker"',
    });
  }

  // Disk
  const dir = nearestExisting(resolve(options.workDir));
  try {
    const fs = statfsSync(dir);
    const free = fs.bavail * fs.bsize;
    checks.push(free >= options.minFreeDiskBytes
      ? { name: 'free disk', status: 'ok', detail: `${gib(free)} free at ${dir} (needs ${gib(options.minFreeDiskBytes)})`, fix: null }
      : { name: 'free disk', status: 'warn', detail: `${gib(free)} free at ${dir}, below ${gib(options.minFreeDiskBytes)}`, fix: 'free space or point work_dir (GF_AGENT_WORK_DIR) at a larger disk; jobs need room for images, inputs and outputs' });
  } catch (err) {
    checks.push({ name: 'free disk', status: 'fail', detail: `cannot stat ${dir}: ${errorText(err)}`, fix: 'create the work directory or set work_dir' });
  }

  // Control plane: reachability and clock
  if (options.server === null) {
    const fix = 'enroll this machine: "gf-agent enroll --server https://CONTROL-PLANE --token gfe_…" (or set server / GF_AGENT_SERVER)';
    checks.push({ name: 'control plane', status: 'skip', detail: 'no control-plane URL configured', fix });
    checks.push({ name: 'clock skew', status: 'skip', detail: 'no control plane to compare with', fix: 'keep the clock synchronized: "timedatectl set-ntp true"' });
  } else {
    const url = new URL('/v1', options.server).toString();
    const before = deps.now().getTime();
    try {
      const res = await deps.fetch(url, { method: 'GET', signal: AbortSignal.timeout(10_000) });
      await res.arrayBuffer().catch(() => undefined);
      const after = deps.now().getTime();
      checks.push({ name: 'control plane', status: res.status < 500 ? 'ok' : 'warn', detail: `${url} answered HTTP ${res.status} in ${after - before} ms`, fix: res.status < 500 ? null : 'the control plane is up but failing: try again later or contact the platform' });
      const date = res.headers.get('date');
      if (!date) {
        checks.push({ name: 'clock skew', status: 'skip', detail: 'the control plane sent no Date header', fix: null });
      } else {
        // The Date header has 1 s resolution: compare against the middle of the round trip.
        const skew = (before + after) / 2 - Date.parse(date);
        const max = options.maxSkewMs ?? 5_000;
        checks.push(Math.abs(skew) <= max + 1000
          ? { name: 'clock skew', status: 'ok', detail: `local clock within ${Math.round(Math.abs(skew))} ms of the control plane's`, fix: null }
          : { name: 'clock skew', status: 'fail', detail: `local clock is ${(skew / 1000).toFixed(1)} s ${skew > 0 ? 'ahead of' : 'behind'} the control plane's`, fix: 'synchronize the clock: "timedatectl set-ntp true" (systemd-timesyncd or chrony)' });
      }
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      checks.push({ name: 'control plane', status: 'fail', detail: `${url} cannot be reached: ${cause?.code ?? cause?.message ?? errorText(err)}`, fix: 'check the URL, DNS and any firewall or proxy between this machine and the control plane (outbound HTTPS)' });
      checks.push({ name: 'clock skew', status: 'skip', detail: 'control plane not reachable', fix: null });
    }
  }
  return checks;
}

/**
 * Which GPUs are offered and as which class; each one that is not, with why. Fails when none is
 * offered (the machine would earn nothing), warns when some are not.
 */
export function gpuSupportCheck(gpus: readonly GpuInventory[]): DoctorCheck {
  const offered = gpus.filter((g) => g.classId !== null);
  const refused = gpus.filter((g) => g.classId === null);
  const offeredText = offered.map((g) => `GPU ${g.index} as ${g.classId}`).join(', ');
  const refusedText = refused.map((g) => `GPU ${g.index} (${g.name}) is not offered: ${g.notOfferedReason ?? 'its class is unknown'}`).join('; ');
  const fix = 'only NVIDIA GPUs of compute capability 7.5 (Turing) or newer are offered; "gf-agent inventory" shows each GPU with its class or reason';
  if (refused.length === 0) return { name: 'gpu support', status: 'ok', detail: `${offered.length} GPU(s) offered: ${offeredText}`, fix: null };
  if (offered.length === 0) return { name: 'gpu support', status: 'fail', detail: `no GPU is offered: ${refusedText}`, fix };
  return { name: 'gpu support', status: 'warn', detail: `${offeredText} offered; ${refusedText}`, fix };
}

function nearestExisting(path: string): string {
  let p = path;
  while (!existsSync(p) && dirname(p) !== p) p = dirname(p);
  return existsSync(p) && statSync(p).isDirectory() ? p : dirname(p);
}

/** Human text for `gf-agent doctor`. */
export function formatDoctor(checks: DoctorCheck[]): string {
  const label = { ok: 'ok  ', warn: 'WARN', fail: 'FAIL', skip: 'skip' } as const;
  const width = Math.max(...checks.map((c) => c.name.length));
  const lines = checks.flatMap((c) => [`[${label[c.status]}] ${c.name.padEnd(width)}  ${c.detail}`, ...(c.fix ? [`       ${' '.repeat(width)}  fix: ${c.fix}`] : [])]);
  const failed = checks.filter((c) => c.status === 'fail').length;
  const warned = checks.filter((c) => c.status === 'warn').length;
  lines.push('', failed === 0 && warned === 0 ? 'all checks passed' : `${failed} check(s) failed, ${warned} warning(s)`);
  return lines.join('\n');
}

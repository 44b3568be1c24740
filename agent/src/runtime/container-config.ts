import type Docker from 'dockerode';
import { GpufarmError, type AssignmentSpec } from '@gpufarm/shared';
import type { EgressSettings } from '../egress/network.js';
import { jobUser } from './job-user.js';

/**
 * The one place container settings come from: an assignment and the machine's facts in,
 * Docker's create options out. Pure: no I/O, tested on plain objects. A request the machine
 * cannot honour (more cores or memory than it has, a reserved env name, an allowlist on an
 * agent without the egress proxy) is refused with a `ContainerConfigError`, never quietly
 * narrowed.
 *
 * What every container gets: the image's `USER`, or `DEFAULT_JOB_USER` (65534) when it names
 * none (`job-user.ts`); all capabilities dropped but `KEPT_CAPABILITIES`, `no-new-privileges`,
 * a read-only root filesystem with a bounded tmpfs `/tmp`, `Init: true` (so PID 1 reaps and
 * forwards signals, and OOM kills are reported reliably), memory with no swap, CPU and pids
 * limits, `NetworkMode: 'none'` (an allowlist job: its internal network, the proxy variables
 * no DNS server and no IPv6, see `egress/network.ts`), `/input/<mountName>` read-only, `/output`
 * read-write on the size-limited mount the caller prepared (given to the job's user),
 * `GF_JOB_ID`, and `GF_DETERMINISTIC=1` for a job declared deterministic. Never privileged,
 * never a Docker socket, never the host's network, PID or IPC namespace, no devices but GPUs.
 */

/** Memory for a job that names none: per reserved GPU, or for a job without GPUs. */
export const DEFAULT_RAM_BYTES_PER_GPU = 32 * 1024 ** 3;
export const DEFAULT_RAM_BYTES_WITHOUT_GPU = 2 * 1024 ** 3;
/** CPU cores for a job that names none: per reserved GPU, or for a job without GPUs. */
export const DEFAULT_CPU_CORES_PER_GPU = 8;
export const DEFAULT_CPU_CORES_WITHOUT_GPU = 1;
/** Processes and threads one container may hold (a fork bomb stops here). */
export const DEFAULT_PIDS_LIMIT = 4096;
/** The writable `/tmp` (tmpfs, counted against the memory limit too). */
export const TMP_TMPFS_BYTES = 1024 ** 3;
/** `/dev/shm`: data loaders need more than Docker's 64 MiB default. */
export const SHM_BYTES_PER_GPU = 2 * 1024 **3;
export const SHM_BYTES_WITHOUT_GPU = 64 * 1024 ** 2;
/** Docker's json-file log rotation for the container (the agent reads lines as they come). */
export const LOG_MAX_SIZE = '64m';
export const LOG_MAX_FILES = '4';
/**
 * Capabilities kept after `CapDrop: ['ALL']`, for every job: nothing in a job's spec can ask for
 * more (the workload policy refuses such requests). Both act inside the job's own namespaces:
 * KILL signals processes of its PID namespace only, NET_BIND_SERVICE binds ports below 1024 in
 * its network namespace (on engines that do not open them to every user already). A job whose
 * user is not root holds no capability at all; these matter to an image whose USER is root.
 * Never kept: CHOWN, DAC_OVERRIDE, FOWNER, FSETID, SETUID, SETGID (so root in a job cannot give
 * files away, read past permissions or become another user), nor anything that reaches the host.
 */
export const KEPT_CAPABILITIES = ['KILL', 'NET_BIND_SERVICE'] as const;

/** What the runtime knows of the machine it runs on. */
export interface MachineFacts {
  /** Simulated GPUs: no `DeviceRequests` (no NVIDIA runtime to honour them). */
  simulated: boolean;
  /** Cores and memory the machine offers to jobs; requests above them are refused. */
  cpuCores: number;
  ramBytes: number;
  /** Overrides `DEFAULT_PIDS_LIMIT` (operator config). */
  pidsLimit?: number;
  /** The egress proxy for allowlist jobs; without it they are refused (`unsupported`). */
  egress?: EgressSettings;
}

/** Where the runtime placed the job's files on the host, and what to call the container. */
export interface ContainerPlacement {
  name: string;
  /** The image to run, pinned: `repo@sha256:…` or an image id. */
  image: string;
  labels: Record<string, string>;
  /** Host files or folders of the downloaded, checked inputs. */
  inputs: Array<{ mountName: string; hostPath: string }>;
  /** The host folder mounted at `/output` (the loop-mounted filesystem, or a plain folder with a watchdog). */
  outputHostPath: string;
  /** The image's `USER` (`''` when it names none), from its config once pulled. */
  imageUser: string;
  /** An allowlist job's network (see `startEgress`): its name, the proxy env, DNS servers and sysctls (IPv6 off). */
  network?: { name: string; env: string[]; dns: string[]; sysctls?: Record<string, string> };
}

export type ContainerConfigErrorCode = 'invalid' | 'unsupported' | 'conflict' | 'duplicate';

/**
 * A request the machine refuses; `code` maps to an `assignment.rejected` reason. Not retryable:
 * this machine refuses the same request again.
 */
export class ContainerConfigError extends GpufarmError<ContainerConfigErrorCode> {
  constructor(code: ContainerConfigErrorCode, message: string) {
    super(code, message);
  }
}

/** The limits an assignment gets on this machine, defaults applied. */
export interface ResolvedLimits {
  ramBytes: number;
  cpuCores: number;
  pidsLimit: number;
  shmBytes: number;
}

/** Applies the per-GPU defaults and refuses requests above what the machine offers. */
export function resolveLimits(spec: AssignmentSpec, machine: MachineFacts): ResolvedLimits {
  const gpus = spec.gpus.length;
  const ramBytes = spec.ramBytes ?? Math.min(machine.ramBytes, gpus > 0 ? gpus * DEFAULT_RAM_BYTES_PER_GPU : DEFAULT_RAM_BYTES_WITHOUT_GPU);
  const cpuCores = spec.cpuCores ?? Math.min(machine.cpuCores, gpus > 0 ? gpus * DEFAULT_CPU_CORES_PER_GPU : DEFAULT_CPU_CORES_WITHOUT_GPU);
  if (ramBytes > machine.ramBytes) {
    throw new ContainerConfigError('conflict', `ramBytes ${ramBytes} is more than the ${machine.ramBytes} bytes this machine offers`);
  }
  if (cpuCores > machine.cpuCores) {
    throw new ContainerConfigError('conflict', `cpuCores ${cpuCores} is more than the ${machine.cpuCores} cores this machine offers`);
  }
  const shmBytes = Math.min(Math.floor(ramBytes / 2), gpus > 0 ? gpus * SHM_BYTES_PER_GPU : SHM_BYTES_WITHOUT_GPU);
  return { ramBytes, cpuCores, pidsLimit: machine.pidsLimit ?? DEFAULT_PIDS_LIMIT, shmBytes };
}

/**
 * Refuses, before anything is pulled or placed, an assignment `toContainerConfig` would refuse.
 * @throws ContainerConfigError as `toContainerConfig`
 */
export function checkContainerConfig(spec: AssignmentSpec, machine: MachineFacts): void {
  toContainerConfig(spec, machine, { name: 'check', image: 'check', labels: {}, inputs: [], outputHostPath: '/', imageUser: '' });
}

/**
 * Docker create options for one assignment.
 *
 * `command` is the whole argv: `command[0]` replaces the image's ENTRYPOINT and the rest its CMD
 * (as `docker run --entrypoint CMD0 IMAGE ARGS…`); an empty command keeps both.
 *
 * @throws ContainerConfigError `unsupported` for an allowlist network policy on a machine
 *   without `egress`, `invalid` for an env name the platform reserves (`GF_*`, and the proxy
 *   variables of an allowlist job), `conflict`
 *   for limits above the machine's, or GPUs reserved on a machine without their UUIDs.
 */
export function toContainerConfig(spec: AssignmentSpec, machine: MachineFacts, placement: ContainerPlacement): Docker.ContainerCreateOptions {
  const allowlist = spec.networkPolicy.mode === 'allowlist';
  if (allowlist && !machine.egress) {
    throw new ContainerConfigError('unsupported', 'network policy allowlist needs the egress proxy, which this agent is not configured with');
  }
  for (const name of Object.keys(spec.env)) {
    if (name.startsWith('GF_')) throw new ContainerConfigError('invalid', `env ${name}: GF_* names are reserved for the platform`);
    if (allowlist && /^(?:https?|no|all)_proxy$/i.test(name)) throw new ContainerConfigError('invalid', `env ${name}: the agent sets the proxy variables of an allowlist job`);
    if (name === '' || name.includes('=') || name.includes('\0')) throw new ContainerConfigError('invalid', `env ${JSON.stringify(name)} is not a valid name`);
  }
  const limits = resolveLimits(spec, machine);
  const network = allowlist ? placement.network : undefined;
  const env = [
    ...Object.entries(spec.env).map(([k, v]) => `${k}=${v}`),
    ...(network?.env ?? []),
    `GF_JOB_ID=${spec.jobId}`,
    // The job declared its outputs reproducible: its code may turn on deterministic algorithms.
    ...(spec.deterministic ? ['GF_DETERMINISTIC=1'] : []),
  ];

  const mounts: Docker.MountSettings[] = [
    ...placement.inputs.map((input) => ({ Type: 'bind' as const, Source: input.hostPath, Target: `/input/${input.mountName}`, ReadOnly: true })),
    { Type: 'bind', Source: placement.outputHostPath, Target: '/output', ReadOnly: false },
  ];

  const hostConfig: Docker.HostConfig = {
    Privileged: false,
    Init: true,
    ReadonlyRootfs: true,
    Tmpfs: { '/tmp': `rw,nosuid,nodev,size=${TMP_TMPFS_BYTES}` },
    ShmSize: limits.shmBytes,
    CapDrop: ['ALL'],
    CapAdd: [...KEPT_CAPABILITIES],
    SecurityOpt: ['no-new-privileges'],
    NetworkMode: network?.name ?? 'none',
    ...(network ? { Dns: network.dns } : {}),
    ...(network?.sysctls && Object.keys(network.sysctls).length > 0 ? { Sysctls: network.sysctls } : {}),
    IpcMode: 'private',
    PidMode: '',
    Memory: limits.ramBytes,
    MemorySwap: limits.ramBytes,
    NanoCpus: limits.cpuCores * 1_000_000_000,
    PidsLimit: limits.pidsLimit,
    Mounts: mounts,
    RestartPolicy: { Name: 'no' },
    AutoRemove: false,
    LogConfig: { Type: 'json-file', Config: { 'max-size': LOG_MAX_SIZE, 'max-file': LOG_MAX_FILES } },
  };
  if (!machine.simulated && spec.gpus.length > 0) {
    hostConfig.DeviceRequests = [{ Driver: 'nvidia', DeviceIDs: spec.gpus.map((g) => g.uuid), Capabilities: [['gpu']] }];
  }

  return {
    name: placement.name,
    Image: placement.image,
    // command[0] replaces the image's ENTRYPOINT and the rest its CMD (the spec's `command`); empty keeps both.
    ...(spec.command.length > 0 ? { Entrypoint: [spec.command[0]!], Cmd: spec.command.slice(1) } : {}),
    User: jobUser(placement.imageUser),
    Env: env,
    Labels: placement.labels,
    Tty: false,
    OpenStdin: false,
    AttachStdin: false,
    AttachStdout: false,
    AttachStderr: false,
    NetworkDisabled: !network,
    HostConfig: hostConfig,
  };
}

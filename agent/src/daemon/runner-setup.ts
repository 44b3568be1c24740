import { createPrivateKey } from 'node:crypto';
import { mkdirSync, statfsSync } from 'node:fs';
import { availableParallelism, totalmem } from 'node:os';
import type Docker from 'dockerode';
import { OffThreadPacker } from '../artifacts/off-thread.js';
import { DockerRuntime } from '../runtime/docker-runtime.js';
import { DockerAssignmentRunner } from '../runner/docker-runner.js';
import type { ImageCache } from '../image-cache/image-cache.js';
import { admitAssignment } from './admission.js';
import type { AgentLog } from '../logger/logger.js';

/** The control plane's upload route of one artifact: outputs go over HTTP, streamed, not over the agent's socket. */
export const AGENT_OUTPUT_UPLOAD_PATH = '/agent/v1/assignments/:assignmentId/outputs/:name';

/**
 * The upload URL of an artifact (`output-<rule index>` or `log`) on the control plane: the
 * route on the server's origin, like the link's `/agent/v1/ws`.
 *
 * @example outputUploadUrl('https://cp.example.com', 'asg_1', 'log') // 'https://cp.example.com/agent/v1/assignments/asg_1/outputs/log'
 */
export function outputUploadUrl(server: string, assignmentId: string, name: string): string {
  const url = new URL(server);
  url.pathname = AGENT_OUTPUT_UPLOAD_PATH.replace(':assignmentId', encodeURIComponent(assignmentId)).replace(':name', encodeURIComponent(name));
  url.search = '';
  url.hash = '';
  return url.toString();
}

/** What `gf-agent run` hands the Docker runner. */
export interface DockerRunnerSetup {
  docker: Docker;
  /** Control-plane base URL (uploads go there). */
  server: string;
  /** Names the agent's containers (their owner label); only its own are restored or removed. */
  machineId: string;
  machineToken: string;
  /** The machine's ed25519 private key (PKCS#8 PEM): signs execution records. */
  machineKeyPem: string;
  /** Job folders: inputs, the /output mount, the log artifact, state (`work_dir`). */
  workDir: string;
  /** Simulated GPUs: containers get no `DeviceRequests`. */
  simulated: boolean;
  /** Bytes of a job's log kept at each end of its log artifact. */
  jobLogKeepBytes?: number;
  minFreeDiskBytes: number;
  /** The egress proxy image (pinned) for allowlist jobs; null refuses them (`unsupported`). */
  egressProxyImage?: string | null;
  /** UUIDs of the GPUs the machine offers now (none while unhealthy). */
  offeredGpus: () => readonly string[];
  /** The image cache (`imageCache`): room for each job's image before it is accepted. */
  images?: ImageCache;
  log: AgentLog;
}

/**
 * The daemon's `AssignmentRunner` on the real Docker Engine: the runtime (containers under
 * limits, labelled with the machine id, folders under `work_dir`), the machine checks of
 * `admitAssignment` before the runner's own, uploads to the control plane with the machine
 * token and records signed with the machine key.
 * Wired once, in `gf-agent run`.
 */
export function dockerRunner(setup: DockerRunnerSetup): DockerAssignmentRunner {
  mkdirSync(setup.workDir, { recursive: true, mode: 0o700 });
  const machineHeaders = () => ({ authorization: `Bearer ${setup.machineToken}` });
  const controlPlane = new URL(setup.server).origin;
  const runtime = new DockerRuntime({
    docker: setup.docker,
    machine: {
      simulated: setup.simulated,
      cpuCores: availableParallelism(),
      ramBytes: totalmem(),
      ...(setup.egressProxyImage ? { egress: { image: setup.egressProxyImage } } : {}),
    },
    owner: setup.machineId,
    stateDir: setup.workDir,
    ...(setup.jobLogKeepBytes ? { logKeepBytes: setup.jobLogKeepBytes } : {}),
    // The machine token goes to the control plane only, never to where an input redirects.
    inputHeaders: (url) => (new URL(url).origin === controlPlane ? machineHeaders() : {}),
    ...(setup.images ? { images: setup.images } : {}),
  });
  return new DockerAssignmentRunner({
    runtime,
    uploadUrl: (assignmentId, name) => outputUploadUrl(setup.server, assignmentId, name),
    uploadHeaders: machineHeaders,
    // Parsed once: a damaged key stops the daemon at start, not at the first result.
    machineKey: createPrivateKey(setup.machineKeyPem),
    // Big outputs are read and hashed on a worker while this thread sends them; the worker
    // lives as long as the daemon.
    artifacts: new OffThreadPacker(),
    admission: (spec) => admitAssignment(spec, { gpuUuids: setup.offeredGpus(), diskFreeBytes: diskFree(setup.workDir), minFreeDiskBytes: setup.minFreeDiskBytes }),
    ...(setup.images ? { images: setup.images } : {}),
    log: setup.log,
  });
}

/** Free bytes of the file system holding `dir`, or null when it cannot be read. */
export function diskFree(dir: string): number | null {
  try {
    const s = statfsSync(dir);
    return s.bavail * s.bsize;
  } catch {
    return null;
  }
}

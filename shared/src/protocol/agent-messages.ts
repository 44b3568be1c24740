import { z } from 'zod';
import { BENCHMARK_TIERS } from '../constants.js';
import { MAX_CLASS_ID_LENGTH, NVIDIA_ARCHITECTURES } from '../catalog/gpu-classes.js';
import { isoTimeSchema, nonNegativeIntSchema, sha256HexSchema } from '../schemas/common.js';
import { logStreamSchema } from '../schemas/logs.js';
import { gpuHealthReportSchema } from '../fleet/gpu-health.js';
import { GPU_PROBE_STATES } from '../fleet/pre-offer.js';
import { assignmentSpecSchema } from './assignment.js';
import { imageCacheReportSchema } from './image-cache.js';

/**
 * The agent protocol: how a farm machine enrolls over HTTP and then
 * talks to the control plane over one WebSocket of JSON messages. Both sides parse every message
 * with these schemas; an invalid message is a protocol error (close code 4400), never guessed at.
 *
 * Enrollment:
 *   agent  POST /agent/v1/enroll  {enrollmentToken: gfe_…, publicKeyPem, inventory, …}
 *   server 201                    {machineId, machineToken: gfa_…, heartbeatIntervalSeconds}
 *
 * Link (`GET /agent/v1/ws`, `Authorization: Bearer gfa_…`, upgraded to a WebSocket):
 *
 *   agent                                  server
 *   hello {protocolVersion, inventory,  ->
 *          benchmark, running}
 *                                       <-  welcome {protocolVersion, machineId, acked}
 *   heartbeat {health, gpus,            ->  (every heartbeatIntervalSeconds)
 *              inventory?, gpuHealth?}
 *                                       <-  assign {assignment}
 *   assignment.accepted | .rejected     ->
 *   assignment.status {state, …}        ->  (each change of state)
 *   logs {assignmentId, lines[seq…]}    ->
 *                                       <-  logs.ack {assignmentId, seq}
 *                                       <-  cancel {assignmentId} | drain {}
 *
 * GPU challenge (protocol 7; docs/decisions.md, "GPU proof"), only while the machine runs no job:
 *                                       <-  challenge.prepare {challengeId, gpus, m, n, k, rounds, preSeed, simulated}
 *   challenge.ready {challengeId}       ->  (the program is set up: container, driver, B)
 *                                       <-  challenge.go {challengeId, seed}
 *   challenge.commit {challengeId,      ->  (every round's Merkle root, per GPU)
 *                     gpus[roots…]}
 *                                       <-  challenge.open {challengeId, rows[uuid, round, row]}
 *   challenge.openings {challengeId,    ->  (each row's Merkle path)
 *                       openings[path]}
 *   challenge.failed {challengeId, reason} ->  instead of any answer: the machine cannot run it
 *                                       <-  challenge.cancel {challengeId, reason}: stop it
 *
 * Log lines are numbered per assignment from 0 (the same `seq` as the public log API). The agent
 * keeps every line until a `logs.ack` covers it and resends unacked lines, in order, after a
 * reconnect; the server stores each (assignmentId, seq) once, so a resent line is harmless.
 * It acks every batch, stored or not: lines of an assignment that ended more than a short grace
 * ago, or that is not the machine's, are dropped; a line on `system` (the service's own stream)
 * is stored as the machine's note on `stderr` (`MACHINE_NOTE_PREFIX`).
 * The agent sends nothing before `welcome` except `hello`.
 */

/**
 * The protocol version this build speaks; `hello` carries it and `welcome` echoes the one chosen.
 * 2 adds `welcome.lostAfterSeconds`; 3 adds `assign.assignment.deterministic`, which the server
 * leaves out for an agent on 1 or 2 (their strict schema refuses an unknown field); 4 adds
 * `heartbeat.gpuHealth`, which the agent sends only once `welcome` chose 4 or later; 5 adds
 * `assignment.status.outputNotes`, likewise sent only once `welcome` chose 5 or later; 6 adds
 * `heartbeat.gpuHealth[].persistenceMode` and `.fabric` and the failure code `gpu_lost`, which
 * the agent sends only once `welcome` chose 6 or later (`lost` before); 7 adds the GPU challenge
 * (`challenge.*`), which the server sends only to an agent on 7 or later (a machine whose agent
 * is older cannot prove its GPUs and is not offered); 8 adds `heartbeat.images` (the image
 * cache, `image-cache.ts`) and the reject reason `image_cache_full`, which the agent sends only
 * once `welcome` chose 8 or later;
 * everything else is as in 1.
 */
export const AGENT_PROTOCOL_VERSION = 8;
/** Every version this build can speak (a server may support several while agents upgrade). */
export const AGENT_PROTOCOL_VERSIONS = [1, 2, 3, 4, 5, 6, 7, 8] as const;
/** The first protocol version with the GPU challenge. */
export const CHALLENGE_PROTOCOL_VERSION = 7;
/** The first protocol version with the image cache report and `image_cache_full`. */
export const IMAGE_CACHE_PROTOCOL_VERSION = 8;

/**
 * The control plane's defaults for a silent machine: offline after this long without a
 * heartbeat (`GF_MACHINE_OFFLINE_SECONDS`), its running assignments requeued this long after
 * that (`GF_MACHINE_LOST_GRACE_SECONDS`). An agent that has not yet had a `welcome` telling it
 * the deployment's own figure assumes their sum.
 */
export const DEFAULT_MACHINE_OFFLINE_SECONDS = 50;
export const DEFAULT_MACHINE_LOST_GRACE_SECONDS = 300;

/** HTTP paths of the agent API on the control plane. */
export const AGENT_ENROLL_PATH = '/agent/v1/enroll';
export const AGENT_WS_PATH = '/agent/v1/ws';

/**
 * WebSocket close codes the server uses (4000-4999 are the application's). The agent does not
 * reconnect after `unauthorized` or `unsupportedVersion`; it does after the others.
 */
export const AGENT_CLOSE_CODES = {
  /** The machine token is unknown, revoked, or the machine was removed. */
  unauthorized: 4401,
  /**
   * A message failed its schema, or came out of order (anything before `hello`, a second
   * `hello`); the reason names the message type and field, or what came out of order.
   */
  invalidMessage: 4400,
  /** No protocol version in common; the reason lists the server's versions. */
  unsupportedVersion: 4426,
  /** Another connection of the same machine took over (the newest wins). */
  replaced: 4409,
  /** No heartbeat or message within three heartbeat intervals, or no `hello` within the handshake time. */
  timeout: 4408,
  /**
   * The control plane could not reach its database while handling a message: the agent
   * reconnects, and its hello and the welcome's `acked` bring back what was not stored.
   */
  unavailable: 4503,
} as const;

/** One-time enrollment token an operator gets from the control plane: `gfe_` + 43 base64url chars (32 bytes). */
export const enrollmentTokenSchema = z.string().regex(/^gfe_[A-Za-z0-9_-]{32,128}$/, { error: 'must be an enrollment token: gfe_ followed by at least 32 base64url characters' });
/** The machine's bearer token for the link and the artifact uploads: `gfa_` + base64url; only its SHA-256 is stored by the server. */
export const machineTokenSchema = z.string().regex(/^gfa_[A-Za-z0-9_-]{32,128}$/, { error: 'must be a machine token: gfa_ followed by at least 32 base64url characters' });
const machineIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, { error: 'must be an id of letters, digits, _ and -' });
const assignmentIdSchema = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, { error: 'must be an id of letters, digits, _ and -' });

// ---------------------------------------------------------------------------------------------
// Inventory: what the machine has. It never carries a hostname, IP address, MAC or user name.

/** One GPU as `nvidia-smi` reports it; live figures are null when the driver does not report them. */
export const gpuInventorySchema = z.strictObject({
  index: nonNegativeIntSchema,
  /** `GPU-…` UUID; the runtime passes it in `DeviceRequests`. Simulated GPUs get `GPU-sim-…`. */
  uuid: z.string().min(1).max(128),
  /** Product name as reported, such as `NVIDIA H100 80GB HBM3`. */
  name: z.string().min(1).max(128),
  /**
   * The GPU's class: a curated one (`shared/src/catalog/gpu-classes.ts`) or a derived one
   * (`derived-…`, `classifyGpu`); null when the GPU is not offered (`notOfferedReason` says why).
   */
  classId: z.string().max(MAX_CLASS_ID_LENGTH).nullable(),
  vramBytes: nonNegativeIntSchema,
  driverVersion: z.string().min(1).max(32),
  /** CUDA version the driver supports, such as `12.4`. */
  cudaVersion: z.string().min(1).max(16),
  temperatureC: z.number().nullable(),
  utilizationPercent: z.number().min(0).max(100).nullable(),
  memoryUsedBytes: nonNegativeIntSchema.nullable(),
  powerDrawWatts: z.number().min(0).nullable(),
  powerLimitWatts: z.number().min(0).nullable(),
  /** True when the agent runs in simulated mode: no such GPU exists. */
  simulated: z.boolean(),
  /** Its generation as the agent told it (compute capability, PCI device id, driver); older agents omit it. */
  architecture: z.enum(NVIDIA_ARCHITECTURES).nullable().optional(),
  /** Compute capability (`9.0`) as the driver reports it or the device id implies; null when unknown. */
  computeCapability: z.string().regex(/^\d{1,2}\.\d{1,2}$/).nullable().optional(),
  /** `nvidia-smi`'s `pci_device_id` as printed (`0x233010DE`); it names a card the driver cannot. */
  pciDeviceId: z.string().max(16).nullable().optional(),
  /** Why the GPU is not offered (`classId` null): an old generation, an unknown one; null when offered. */
  notOfferedReason: z.string().max(500).nullable().optional(),
});
export type GpuInventory = z.infer<typeof gpuInventorySchema>;

/** Host facts; nothing that identifies the host on a network. */
export const hostInventorySchema = z.strictObject({
  cpuModel: z.string().max(256),
  cpuCores: z.int().min(1),
  cpuThreads: z.int().min(1),
  ramBytes: nonNegativeIntSchema,
  /** Free and total bytes of the file system holding the agent's work directory. */
  diskFreeBytes: nonNegativeIntSchema,
  diskTotalBytes: nonNegativeIntSchema,
  /** Distribution and release, such as `Debian GNU/Linux 12`. */
  os: z.string().max(128),
  kernel: z.string().max(128),
  arch: z.string().max(32),
});
export type HostInventory = z.infer<typeof hostInventorySchema>;

/**
 * Whether the machine may be offered. A machine whose GPUs no container can see is `unhealthy`
 * with the reason, and its inventory lists no GPUs (`gpus: []`; `detectedGpuCount` says how
 * many `nvidia-smi` saw), so the control plane never offers what cannot run.
 */
export const machineHealthSchema = z.strictObject({
  status: z.enum(['healthy', 'unhealthy']),
  /** Why it is unhealthy, with what the operator can do; null when healthy. */
  reason: z.string().max(2000).nullable(),
  gpuProbe: z.enum(GPU_PROBE_STATES),
  /**
   * The GPUs the probe container's `nvidia-smi -L` listed (product name and UUID, in its order)
   * when the probe passed; null otherwise. The control plane compares it with the inventory's
   * GPUs: a machine whose container sees other GPUs than it claims is unhealthy. Older agents
   * omit it, and their machines cannot be verified.
   */
  probeListing: z.array(z.strictObject({ name: z.string().min(1).max(128), uuid: z.string().min(1).max(128) })).max(64).nullable().optional(),
  checkedAt: isoTimeSchema,
});
export type MachineHealth = z.infer<typeof machineHealthSchema>;

export const machineInventorySchema = z.strictObject({
  agentVersion: z.string().min(1).max(64),
  simulated: z.boolean(),
  host: hostInventorySchema,
  /** GPUs the machine offers: empty while unhealthy. */
  gpus: z.array(gpuInventorySchema).max(64),
  /** GPUs `nvidia-smi` listed (or simulated), whether or not they are offered. */
  detectedGpuCount: nonNegativeIntSchema,
  driverVersion: z.string().max(32).nullable(),
  cudaVersion: z.string().max(16).nullable(),
  health: machineHealthSchema,
  collectedAt: isoTimeSchema,
});
export type MachineInventory = z.infer<typeof machineInventorySchema>;

// ---------------------------------------------------------------------------------------------
// Benchmark

export const benchmarkTierSchema = z.enum(BENCHMARK_TIERS);

/**
 * One GPU's figures from gpu-bench (docs/gpu-benchmark.md). Tiers compare `matmulGflops` (dense
 * FP16 tensor-core matmul, fp32 accumulation, GFLOPS) and `memoryBandwidthMbps` (a device copy,
 * bytes read plus written, MB/s); the other figures are for the operator and older agents
 * leave them out.
 */
export const gpuBenchmarkSchema = z.strictObject({
  index: nonNegativeIntSchema,
  uuid: z.string().min(1),
  matmulGflops: z.number().min(0),
  memoryBandwidthMbps: z.number().min(0),
  fp16MatmulGflops: z.number().min(0).optional(),
  /** Null on GPUs without bf16 tensor cores (compute capability below 8.0). */
  bf16MatmulGflops: z.number().min(0).nullable().optional(),
  /** FP32 FMA throughput, GFLOPS. */
  fp32Gflops: z.number().min(0).optional(),
  /** Pinned host memory to the GPU over its bus, MB/s. */
  hostToDeviceMbps: z.number().min(0).optional(),
  deviceToHostMbps: z.number().min(0).optional(),
});

/**
 * A benchmark run. `completed`: measured on real GPUs in the benchmark container. `simulated`:
 * the machine runs in simulated mode, so no GPU figure exists and none is invented (`gpus: []`,
 * `tier: null`). `not_run`: the GPU part could not run (`reason` says why); host figures may
 * still be there.
 */
export const benchmarkResultSchema = z.strictObject({
  status: z.enum(['completed', 'simulated', 'not_run']),
  reason: z.string().max(2000).nullable(),
  /** Worst GPU's tier against its class's expected figures; null without GPU figures. */
  tier: benchmarkTierSchema.nullable(),
  host: z.strictObject({
    diskWriteMBps: z.number().min(0).nullable(),
    sha256MBps: z.number().min(0).nullable(),
  }),
  gpus: z.array(gpuBenchmarkSchema).max(64),
  ranAt: isoTimeSchema,
});
export type BenchmarkResult = z.infer<typeof benchmarkResultSchema>;

// ---------------------------------------------------------------------------------------------
// Enrollment over HTTP

/** `POST /agent/v1/enroll` body. The token is single-use; a second use answers 401. */
export const enrollRequestSchema = z.strictObject({
  enrollmentToken: enrollmentTokenSchema,
  /** The machine's ed25519 public key, SPKI PEM; it verifies the signed execution records. */
  publicKeyPem: z.string().regex(/^-----BEGIN PUBLIC KEY-----\n[A-Za-z0-9+/=\n]+-----END PUBLIC KEY-----\n?$/, { error: 'must be an SPKI PEM public key' }).max(512),
  agentVersion: z.string().min(1).max(64),
  protocolVersion: z.int().min(1),
  inventory: machineInventorySchema,
});
export type EnrollRequest = z.infer<typeof enrollRequestSchema>;

/** `201` answer to enrollment. Errors use the API's error envelope (`invalid_request`, 401 for a bad or used token). */
export const enrollResponseSchema = z.strictObject({
  machineId: machineIdSchema,
  machineToken: machineTokenSchema,
  heartbeatIntervalSeconds: z.int().min(1).max(300),
});
export type EnrollResponse = z.infer<typeof enrollResponseSchema>;

// ---------------------------------------------------------------------------------------------
// Agent -> server

/** An assignment the agent holds (running, or finished while the link was down and not yet reported). */
export const runningAssignmentSchema = z.strictObject({
  assignmentId: assignmentIdSchema,
  jobId: z.string().min(1).max(64),
  state: z.enum(['running', 'exited', 'uploading']),
  /** The next seq the agent will give a log line (all lines below it exist on the agent). */
  nextLogSeq: nonNegativeIntSchema,
});
export type RunningAssignment = z.infer<typeof runningAssignmentSchema>;

export const helloMessageSchema = z.strictObject({
  type: z.literal('hello'),
  protocolVersion: z.int().min(1),
  /** Versions this agent can speak; the server picks one and says it in `welcome`. */
  supportedVersions: z.array(z.int().min(1)).min(1),
  agentVersion: z.string().min(1).max(64),
  inventory: machineInventorySchema,
  benchmark: benchmarkResultSchema.nullable(),
  running: z.array(runningAssignmentSchema).max(256),
  /** True while draining: the agent takes no new assignment. */
  draining: z.boolean(),
});

/** Live figures of one GPU, sent with every heartbeat. */
export const gpuLiveSchema = z.strictObject({
  index: nonNegativeIntSchema,
  uuid: z.string().min(1),
  temperatureC: z.number().nullable(),
  utilizationPercent: z.number().min(0).max(100).nullable(),
  memoryUsedBytes: nonNegativeIntSchema.nullable(),
  powerDrawWatts: z.number().min(0).nullable(),
});

export const heartbeatMessageSchema = z.strictObject({
  type: z.literal('heartbeat'),
  sentAt: isoTimeSchema,
  health: machineHealthSchema,
  gpus: z.array(gpuLiveSchema).max(64),
  /** The whole inventory when it changed since the last one sent on this connection (GPU count, model, driver, health); null otherwise. */
  inventory: machineInventorySchema.nullable(),
  runningAssignmentIds: z.array(assignmentIdSchema).max(256),
  draining: z.boolean(),
  /**
   * Protocol 4 (absent before): each GPU's health inputs (`shared/src/fleet/gpu-health.ts`),
   * counters and XIDs rather than a verdict, so the control plane judges them itself. Every
   * GPU nvidia-smi listed or lost, whether or not the machine offers it. Sent in the first
   * heartbeat after `welcome` and whenever anything but the live figures changed
   * (`gpuHealthCountersKey`); absent, it is as last sent on this connection, with the
   * temperature and utilization of `gpus`.
   */
  gpuHealth: z.array(gpuHealthReportSchema).max(64).optional(),
  /**
   * Protocol 8 (absent before): the images the machine holds. Sent in the first heartbeat
   * after `welcome` and whenever the cache changed; absent, it is as last sent on this
   * connection.
   */
  images: imageCacheReportSchema.optional(),
});

export const assignmentAcceptedMessageSchema = z.strictObject({
  type: z.literal('assignment.accepted'),
  assignmentId: assignmentIdSchema,
});

/**
 * Why an agent refuses an assignment; the control plane requeues the job and excludes the
 * machine for it. `image_cache_full` (protocol 8): the job's image does not fit the machine's
 * image cache budget beside the images its running and assigned jobs need.
 */
export const ASSIGNMENT_REJECT_REASONS = ['not_ready', 'draining', 'unhealthy', 'gpus_unavailable', 'duplicate', 'unsupported', 'invalid', 'image_cache_full'] as const;

export const assignmentRejectedMessageSchema = z.strictObject({
  type: z.literal('assignment.rejected'),
  assignmentId: assignmentIdSchema,
  reason: z.enum(ASSIGNMENT_REJECT_REASONS),
  message: z.string().max(2000),
});

export const ASSIGNMENT_STATES = ['pulling', 'starting', 'running', 'stopping', 'exited', 'uploading', 'finished', 'failed'] as const;
/**
 * Why an assignment failed on the machine: an infrastructure fault the control plane retries
 * elsewhere. `gpu_lost` (protocol 6): the running container could no longer reach its GPUs (the
 * container runtime rewrote its device rules, after a Docker restart or `systemctl
 * daemon-reload`), and the agent stopped it.
 */
export const ASSIGNMENT_FAILURES = ['pull_failed', 'digest_mismatch', 'input_failed', 'create_failed', 'upload_failed', 'lost', 'internal', 'gpu_lost'] as const;

export const assignmentOutputSchema = z.strictObject({
  /** The output rule's path under /output. */
  path: z.string().min(1),
  /** The artifact's name in the upload URL: `output-<index of the rule>` (added in protocol 1; older agents omit it). */
  name: z.string().regex(/^output-\d+$/).optional(),
  sha256: sha256HexSchema,
  sizeBytes: nonNegativeIntSchema,
});

/**
 * Why an output rule has no artifact, or what its artifact leaves out; each is the job's own
 * doing, so the job completes and is billed. `over_limit`: more than its `maxBytes`, not
 * stored; `unpackable`: the job's own files could not be packed (its path runs through a
 * symlink, a file the job's user cannot read, one that vanished), not stored; `skipped`:
 * stored without the FIFOs, sockets and device nodes the message names, which are never opened.
 */
export const OUTPUT_NOTE_KINDS = ['over_limit', 'unpackable', 'skipped'] as const;
/** Longest message of an output note (the agent cuts a longer one: paths under /output may be long). */
export const OUTPUT_NOTE_MAX_CHARS = 2000;

export const assignmentOutputNoteSchema = z.strictObject({
  /** The output rule's path under /output. */
  path: z.string().min(1),
  /** The rule's artifact name, `output-<index of the rule>`. */
  name: z.string().regex(/^output-\d+$/),
  kind: z.enum(OUTPUT_NOTE_KINDS),
  message: z.string().max(OUTPUT_NOTE_MAX_CHARS),
});
export type AssignmentOutputNote = z.infer<typeof assignmentOutputNoteSchema>;

/**
 * A change of an assignment's state. `finished` comes once outputs and the log artifact are
 * uploaded and carries the exit facts and the signed execution record; `failed` carries the
 * failure code. Fields that do not apply yet are null.
 */
export const assignmentStatusMessageSchema = z.strictObject({
  type: z.literal('assignment.status'),
  assignmentId: assignmentIdSchema,
  state: z.enum(ASSIGNMENT_STATES),
  at: isoTimeSchema,
  imageDigest: z.string().regex(/^sha256:[a-f0-9]{64}$/).nullable(),
  startedAt: isoTimeSchema.nullable(),
  finishedAt: isoTimeSchema.nullable(),
  exitCode: z.int().nullable(),
  oomKilled: z.boolean().nullable(),
  timedOut: z.boolean().nullable(),
  failure: z.strictObject({ code: z.enum(ASSIGNMENT_FAILURES), message: z.string().max(2000) }).nullable(),
  outputs: z.array(assignmentOutputSchema).max(16).nullable(),
  /**
   * With `finished`, protocol 5 (absent before): what the agent has to say of output rules
   * (`assignmentOutputNoteSchema`), at most one per rule. Absent, a rule without an output was
   * over its limit.
   */
  outputNotes: z.array(assignmentOutputNoteSchema).max(16).optional(),
  /** The log artifact (uploaded as `log`), with `finished` (added in protocol 1; older agents omit it). */
  log: z.strictObject({ sha256: sha256HexSchema, sizeBytes: nonNegativeIntSchema }).nullable().optional(),
  /** The execution record (JSON text) and its ed25519 signature (base64) by the machine key. */
  record: z.strictObject({ json: z.string().max(65536), signature: z.string().max(256) }).nullable(),
  /** The last seq given to a log line of this assignment (null before the first line). */
  lastLogSeq: nonNegativeIntSchema.nullable(),
});

/** Largest text of one log line; the agent splits longer lines. */
export const MAX_LOG_LINE_CHARS = 16 * 1024;
/**
 * Largest log artifact (`log`) the control plane stores. The agent keeps the first and the last
 * part of a longer job log, each at most half of this less a margin (its `job_log_keep_bytes`).
 */
export const LOG_ARTIFACT_MAX_BYTES = 1024 * 1024 * 1024;
/** Most lines in one `logs` message. */
export const MAX_LOG_BATCH_LINES = 10_000;

export const logBatchLineSchema = z.strictObject({
  seq: nonNegativeIntSchema,
  stream: logStreamSchema,
  /** Milliseconds since the epoch when the agent read the line. */
  atMs: nonNegativeIntSchema,
  line: z.string().max(MAX_LOG_LINE_CHARS),
});
export type LogBatchLine = z.infer<typeof logBatchLineSchema>;

/** Consecutive lines of one assignment: each line's seq is the one before plus one. */
export const logsMessageSchema = z
  .strictObject({
    type: z.literal('logs'),
    assignmentId: assignmentIdSchema,
    lines: z.array(logBatchLineSchema).min(1).max(MAX_LOG_BATCH_LINES),
  })
  .check((ctx) => {
    const lines = ctx.value.lines;
    for (let i = 1; i < lines.length; i++) {
      if (lines[i]!.seq !== lines[i - 1]!.seq + 1) {
        ctx.issues.push({ code: 'custom', message: 'seq must increase by one within a batch', path: ['lines', i, 'seq'], input: lines[i]!.seq });
        return;
      }
    }
  });

// ---------------------------------------------------------------------------------------------
// GPU challenge (protocol 7): the exact work of shared/src/proof/gpu-challenge.ts

const challengeIdSchema = z.string().regex(/^chl_[A-Za-z0-9_-]{1,60}$/, { error: 'must be a challenge id: chl_ followed by letters, digits, _ and -' });
const seedHexSchema = z.string().regex(/^[0-9a-f]{64}$/, { error: 'must be 64 lower-case hex digits (32 bytes)' });
/** At most this many rounds in a challenge (every class's plan has fewer: `challengePlan`). */
export const CHALLENGE_MAX_ROUNDS = 4096;
/** At most this many GPUs in one challenge (a machine's whole set). */
export const CHALLENGE_MAX_GPUS = 64;
/** At most this many rows opened per GPU. */
export const CHALLENGE_MAX_CHECKS = 64;
const powerOfTwo = (min: number, max: number) =>
  z.int().min(min).max(max).refine((v) => (v & (v - 1)) === 0, { error: 'must be a power of two' });
/** Concatenated 32-byte hashes as lower-case hex (gpu-bench prints them so). */
const hashesHexSchema = (max: number) =>
  z.string().max(64 * max).regex(/^(?:[0-9a-f]{64})+$/, { error: 'must be 32-byte hashes as lower-case hex, concatenated' });

export const challengeReadyMessageSchema = z.strictObject({
  type: z.literal('challenge.ready'),
  challengeId: challengeIdSchema,
});

/** Every GPU's committed chain: `rounds` Merkle roots in round order, and the GPU time it took. */
export const challengeCommitMessageSchema = z.strictObject({
  type: z.literal('challenge.commit'),
  challengeId: challengeIdSchema,
  gpus: z
    .array(
      z.strictObject({
        uuid: z.string().min(1).max(128),
        roots: hashesHexSchema(CHALLENGE_MAX_ROUNDS),
        /** Seconds the GPU spent on the chain, as the machine measured it (events on the GPU's stream). */
        gpuSeconds: z.number().finite().min(0).max(86_400),
      }),
    )
    .min(1)
    .max(CHALLENGE_MAX_GPUS),
});

/** Each opened row's Merkle path (leaf's sibling first), in the order `challenge.open` asked. */
export const challengeOpeningsMessageSchema = z.strictObject({
  type: z.literal('challenge.openings'),
  challengeId: challengeIdSchema,
  openings: z
    .array(
      z.strictObject({
        uuid: z.string().min(1).max(128),
        round: nonNegativeIntSchema,
        row: nonNegativeIntSchema,
        path: hashesHexSchema(20),
      }),
    )
    .max(CHALLENGE_MAX_GPUS * CHALLENGE_MAX_CHECKS),
});

/** The machine cannot run (or finish) the challenge: a job holds its GPUs, the program failed… */
export const challengeFailedMessageSchema = z.strictObject({
  type: z.literal('challenge.failed'),
  challengeId: challengeIdSchema,
  reason: z.string().min(1).max(2000),
});

export type ChallengeReadyMessage = z.infer<typeof challengeReadyMessageSchema>;
export type ChallengeCommitMessage = z.infer<typeof challengeCommitMessageSchema>;
export type ChallengeOpeningsMessage = z.infer<typeof challengeOpeningsMessageSchema>;
export type ChallengeFailedMessage = z.infer<typeof challengeFailedMessageSchema>;

export const agentMessageSchema = z.discriminatedUnion('type', [
  helloMessageSchema,
  heartbeatMessageSchema,
  assignmentAcceptedMessageSchema,
  assignmentRejectedMessageSchema,
  assignmentStatusMessageSchema,
  logsMessageSchema,
  challengeReadyMessageSchema,
  challengeCommitMessageSchema,
  challengeOpeningsMessageSchema,
  challengeFailedMessageSchema,
]);
export type AgentMessage = z.infer<typeof agentMessageSchema>;
export type HelloMessage = z.infer<typeof helloMessageSchema>;
export type HeartbeatMessage = z.infer<typeof heartbeatMessageSchema>;
export type AssignmentRejectedMessage = z.infer<typeof assignmentRejectedMessageSchema>;
export type AssignmentStatusMessage = z.infer<typeof assignmentStatusMessageSchema>;
export type LogsMessage = z.infer<typeof logsMessageSchema>;

// ---------------------------------------------------------------------------------------------
// Server -> agent

/**
 * The answer to `hello`. `acked` lists, for each assignment of `hello.running`, the highest seq
 * the server stored (null: none), so the agent resends only what is missing.
 */
export const welcomeMessageSchema = z.strictObject({
  type: z.literal('welcome'),
  protocolVersion: z.int().min(1),
  supportedVersions: z.array(z.int().min(1)).min(1),
  machineId: machineIdSchema,
  heartbeatIntervalSeconds: z.int().min(1).max(300),
  serverTime: isoTimeSchema,
  acked: z.array(z.strictObject({ assignmentId: assignmentIdSchema, seq: nonNegativeIntSchema.nullable() })).max(256),
  /**
   * Protocol 2 (absent in 1): the control plane may take back and requeue this machine's
   * accepted and running assignments once it has had no heartbeat from it for this long
   * (never sooner). The agent stops its containers before that while it cannot reach the
   * control plane, so a job never runs on two machines at once.
   */
  lostAfterSeconds: z.int().min(1).max(10 * 86_400).optional(),
});

export const assignMessageSchema = z.strictObject({
  type: z.literal('assign'),
  assignment: assignmentSpecSchema,
});

/** Every line of the assignment with `seq` at or below this one is stored (cumulative). */
export const logsAckMessageSchema = z.strictObject({
  type: z.literal('logs.ack'),
  assignmentId: assignmentIdSchema,
  seq: nonNegativeIntSchema,
});

/** Stop the assignment (customer cancel, or the control plane gave it up); outputs so far are still uploaded. */
export const cancelMessageSchema = z.strictObject({
  type: z.literal('cancel'),
  assignmentId: assignmentIdSchema,
  reason: z.string().max(500),
});

/** Take no new assignment; let running ones finish. `undrain: true` lifts it. */
export const drainMessageSchema = z.strictObject({
  type: z.literal('drain'),
  undrain: z.boolean(),
  reason: z.string().max(500).nullable(),
});

/**
 * Set up a GPU challenge on these GPUs (the machine's whole offered set) and say
 * `challenge.ready`; the timed part starts at `challenge.go`. `simulated`: the machine runs in
 * simulated mode, so the same work runs on the CPU (small shapes, no timing).
 */
export const challengePrepareMessageSchema = z.strictObject({
  type: z.literal('challenge.prepare'),
  challengeId: challengeIdSchema,
  gpus: z.array(z.strictObject({ index: nonNegativeIntSchema, uuid: z.string().min(1).max(128) })).min(1).max(CHALLENGE_MAX_GPUS),
  m: powerOfTwo(256, 1 << 20),
  n: powerOfTwo(256, 16384),
  k: powerOfTwo(256, 16384),
  rounds: z.int().min(1).max(CHALLENGE_MAX_ROUNDS),
  /** Seeds B (before the timed part). */
  preSeed: seedHexSchema,
  simulated: z.boolean(),
});

/** The fresh seed the chain starts from; the server's clock runs from here to `challenge.commit`. */
export const challengeGoMessageSchema = z.strictObject({
  type: z.literal('challenge.go'),
  challengeId: challengeIdSchema,
  seed: seedHexSchema,
});

/** The rows the server picked after the commitment: send each one's Merkle path. */
export const challengeOpenMessageSchema = z.strictObject({
  type: z.literal('challenge.open'),
  challengeId: challengeIdSchema,
  rows: z
    .array(z.strictObject({ uuid: z.string().min(1).max(128), round: nonNegativeIntSchema, row: nonNegativeIntSchema }))
    .min(1)
    .max(CHALLENGE_MAX_GPUS * CHALLENGE_MAX_CHECKS),
});

/** The server gave the challenge up (or decided it): stop its program and free the GPUs. */
export const challengeCancelMessageSchema = z.strictObject({
  type: z.literal('challenge.cancel'),
  challengeId: challengeIdSchema,
  reason: z.string().max(500),
});

export const serverMessageSchema = z.discriminatedUnion('type', [
  welcomeMessageSchema,
  assignMessageSchema,
  logsAckMessageSchema,
  cancelMessageSchema,
  drainMessageSchema,
  challengePrepareMessageSchema,
  challengeGoMessageSchema,
  challengeOpenMessageSchema,
  challengeCancelMessageSchema,
]);
export type ChallengePrepareMessage = z.infer<typeof challengePrepareMessageSchema>;
export type ChallengeGoMessage = z.infer<typeof challengeGoMessageSchema>;
export type ChallengeOpenMessage = z.infer<typeof challengeOpenMessageSchema>;
export type ChallengeCancelMessage = z.infer<typeof challengeCancelMessageSchema>;
export type ServerMessage = z.infer<typeof serverMessageSchema>;
export type WelcomeMessage = z.infer<typeof welcomeMessageSchema>;
export type AssignMessage = z.infer<typeof assignMessageSchema>;
export type LogsAckMessage = z.infer<typeof logsAckMessageSchema>;
export type CancelMessage = z.infer<typeof cancelMessageSchema>;
export type DrainMessage = z.infer<typeof drainMessageSchema>;

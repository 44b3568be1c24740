import { execFile } from 'node:child_process';
import { createHash, randomBytes, generateKeyPairSync } from 'node:crypto';
import {
  AGENT_PROTOCOL_VERSION,
  AGENT_PROTOCOL_VERSIONS,
  AGENT_WS_PATH,
  serverMessageSchema,
  type AgentMessage,
  type AssignmentSpec,
  type AssignmentStatusMessage,
  type ChallengePlan,
  type EnrollRequest,
  type HelloMessage,
  type HeartbeatMessage,
  type MachineInventory,
  type RunningAssignment,
  type ServerMessage,
} from '@gpufarm/shared';
import { int8Matrix, leafHash, merkleLevels, merklePath, nextRoundSeed, productRow, seedFor } from '@gpufarm/shared/node';
import WebSocket from 'ws';
import { createEnrollmentToken } from '../../src/farms/enrollment-tokens.js';
import { createAgentGateway, type AgentGateway } from '../../src/agent-gateway/gateway.js';
import type { LifecyclePort } from '../../src/agent-gateway/lifecycle-port.js';
import type { ExecutionDeps } from '../../src/execution/deps.js';
import { executionLifecycle } from '../../src/execution/lifecycle.js';
import type { Database } from '../../src/db/database.js';
import { createControlPlaneMetrics, type ControlPlaneMetrics } from '../../src/metrics/registry.js';
import { buildTestApp, createTestKey, type TestApp } from './app.js';
import { tarOf } from './uploads.js';
import { testCommand } from '@gpufarm/shared/build/test-bundles';
import { captureLog, type LogLine } from './logger.js';

/**
 * A test agent: inventories, hello and heartbeat messages, and a real `ws` client that parses
 * every server message with the shared schema; plus factories for the rows the gateway reads
 * (enrollment tokens, jobs, assignments) and an app with the gateway listening on a real port.
 */

interface TestContext {
  teardown(fn: () => unknown): void;
}

export function testInventory(options: { gpus?: number; classId?: string | null; simulated?: boolean; healthy?: boolean; driverVersion?: string } = {}): MachineInventory {
  const count = options.gpus ?? 2;
  const healthy = options.healthy ?? true;
  const simulated = options.simulated ?? true;
  const driverVersion = options.driverVersion ?? '550.54.15';
  const now = new Date().toISOString();
  return {
    agentVersion: '0.1.0',
    simulated,
    host: { cpuModel: 'Test CPU', cpuCores: 16, cpuThreads: 32, ramBytes: 64 * 2 ** 30, diskFreeBytes: 500 * 2 ** 30, diskTotalBytes: 1000 * 2 ** 30, os: 'Debian GNU/Linux 12', kernel: '6.1.0', arch: 'x64' },
    gpus: healthy
      ? Array.from({ length: count }, (_, index) => ({
          index,
          uuid: `GPU-sim-${index}-0000`,
          name: 'NVIDIA GeForce RTX 4090',
          classId: options.classId === undefined ? 'rtx-4090-24gb' : options.classId,
          vramBytes: 24 * 2 ** 30,
          driverVersion,
          cudaVersion: '12.4',
          temperatureC: null,
          utilizationPercent: null,
          memoryUsedBytes: null,
          powerDrawWatts: null,
          powerLimitWatts: null,
          simulated,
        }))
      : [],
    detectedGpuCount: count,
    driverVersion,
    cudaVersion: '12.4',
    health: healthy
      ? { status: 'healthy', reason: null, gpuProbe: simulated ? 'simulated' : 'passed', checkedAt: now }
      : { status: 'unhealthy', reason: 'no container can see the GPUs: install the NVIDIA container toolkit', gpuProbe: 'failed', checkedAt: now },
    collectedAt: now,
  };
}

export function testPublicKeyPem(): string {
  return generateKeyPairSync('ed25519').publicKey.export({ type: 'spki', format: 'pem' }).toString();
}

export function enrollBody(enrollmentToken: string, inventory: MachineInventory = testInventory()): EnrollRequest {
  return { enrollmentToken, publicKeyPem: testPublicKeyPem(), agentVersion: '0.1.0', protocolVersion: AGENT_PROTOCOL_VERSION, inventory };
}

export function hello(inventory: MachineInventory = testInventory(), running: RunningAssignment[] = [], extra: Partial<HelloMessage> = {}): HelloMessage {
  return {
    type: 'hello',
    protocolVersion: AGENT_PROTOCOL_VERSION,
    supportedVersions: [...AGENT_PROTOCOL_VERSIONS],
    agentVersion: '0.1.0',
    inventory,
    benchmark: null,
    running,
    draining: false,
    ...extra,
  };
}

export function heartbeat(extra: Partial<HeartbeatMessage> = {}): HeartbeatMessage {
  return {
    type: 'heartbeat',
    sentAt: new Date().toISOString(),
    health: { status: 'healthy', reason: null, gpuProbe: 'simulated', checkedAt: new Date().toISOString() },
    gpus: [{ index: 0, uuid: 'GPU-sim-0-0000', temperatureC: 41, utilizationPercent: 12, memoryUsedBytes: 1024, powerDrawWatts: 80 }],
    inventory: null,
    runningAssignmentIds: [],
    draining: false,
    ...extra,
  };
}

/** A real WebSocket client of the gateway: every server message is parsed with `serverMessageSchema`. */
export class AgentSocket {
  readonly received: ServerMessage[] = [];
  readonly closed: Promise<{ code: number; reason: string }>;
  private waiters: Array<() => void> = [];
  private barriers = 0;
  /** The server's close code and reason, once it closed: what a failed wait reports. */
  private closedWith: string | null = null;

  private constructor(readonly ws: WebSocket) {
    this.closed = new Promise((resolve) => ws.on('close', (code, reason) => {
      this.closedWith = `${code}: ${reason.toString() || 'no reason'}`;
      resolve({ code, reason: reason.toString() });
      this.wake();
    }));
    ws.on('message', (data) => {
      this.received.push(serverMessageSchema.parse(JSON.parse(data.toString())));
      this.wake();
    });
  }

  /** Opens the socket; rejects with the HTTP status when the upgrade is refused. */
  static connect(baseUrl: string, machineToken: string | null): Promise<AgentSocket> {
    const ws = new WebSocket(baseUrl.replace(/^http/, 'ws') + AGENT_WS_PATH, machineToken ? { headers: { authorization: `Bearer ${machineToken}` } } : {});
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new AgentSocket(ws)));
      ws.once('unexpected-response', (_req, res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => reject(Object.assign(new Error(`upgrade refused: HTTP ${res.statusCode}`), { statusCode: res.statusCode, body: Buffer.concat(chunks).toString() })));
      });
      ws.once('error', reject);
    });
  }

  send(message: AgentMessage | Record<string, unknown>): void {
    this.ws.send(JSON.stringify(message));
  }

  /** The first received message of `type` matching `where` that was not taken yet. */
  async next<T extends ServerMessage['type']>(type: T, where: (m: Extract<ServerMessage, { type: T }>) => boolean = () => true, timeoutMs = 10_000): Promise<Extract<ServerMessage, { type: T }>> {
    return this.nextOf([type], where, timeoutMs);
  }

  /** The first received message of any of `types` matching `where` that was not taken yet. */
  async nextOf<T extends ServerMessage['type']>(types: readonly T[], where: (m: Extract<ServerMessage, { type: T }>) => boolean = () => true, timeoutMs = 10_000): Promise<Extract<ServerMessage, { type: T }>> {
    const type = types.join(' or ');
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const index = this.received.findIndex((m) => (types as readonly string[]).includes(m.type) && where(m as Extract<ServerMessage, { type: T }>));
      if (index >= 0) return this.received.splice(index, 1)[0] as Extract<ServerMessage, { type: T }>;
      if (this.ws.readyState === WebSocket.CLOSED) throw new Error(`socket closed (${this.closedWith ?? 'no close frame'}) while waiting for ${type}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${type}; received ${JSON.stringify(this.received.map((m) => m.type))}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 200);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /**
   * Resolves once the gateway handled every message sent before it: the gateway handles a
   * socket's messages in order and acks logs even of an assignment it does not know.
   */
  async barrier(): Promise<void> {
    const assignmentId = `barrier_${++this.barriers}`;
    this.send({ type: 'logs', assignmentId, lines: [{ seq: 0, stream: 'stdout', atMs: Date.now(), line: 'barrier' }] });
    await this.next('logs.ack', (m) => m.assignmentId === assignmentId);
  }

  close(): void {
    this.ws.close(1000, 'test done');
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}

/** Lifecycle calls the gateway made, in order, each also passed on to the real lifecycle. */
export interface LifecycleCall {
  fn: keyof LifecyclePort;
  assignmentId: string;
  args: unknown[];
}

/** A port that records each call and then passes it on to `real` (errors are the gateway's to log). */
export function countingLifecycle(calls: LifecycleCall[], real: LifecyclePort): LifecyclePort {
  return {
    assignmentAccepted: (machineId, assignmentId) => {
      calls.push({ fn: 'assignmentAccepted', assignmentId, args: [machineId] });
      return real.assignmentAccepted(machineId, assignmentId);
    },
    assignmentRejected: (machineId, assignmentId, reason, message) => {
      calls.push({ fn: 'assignmentRejected', assignmentId, args: [machineId, reason, message] });
      return real.assignmentRejected(machineId, assignmentId, reason, message);
    },
    assignmentStatus: (machineId, message) => {
      calls.push({ fn: 'assignmentStatus', assignmentId: message.assignmentId, args: [machineId, message.state] });
      return real.assignmentStatus(machineId, message);
    },
    assignmentLost: (assignmentId, reason) => {
      calls.push({ fn: 'assignmentLost', assignmentId, args: [reason] });
      return real.assignmentLost(assignmentId, reason);
    },
    assignmentGpuFailed: (assignmentId, reason) => {
      calls.push({ fn: 'assignmentGpuFailed', assignmentId, args: [reason] });
      return real.assignmentGpuFailed(assignmentId, reason);
    },
  };
}

/** The gateway never touches artifact bytes; any use is a test failure. */
export interface GatewayTestApp extends TestApp {
  gateway: AgentGateway;
  url: string;
  calls: LifecycleCall[];
  /** The gateway's and the lifecycle's log lines, parsed (fields and `msg`). */
  logs: LogLine[];
  /** The gateway's metrics (agent log bytes, refused agent lines). */
  metrics: ControlPlaneMetrics;
}

/**
 * The real app with the agent gateway, listening on 127.0.0.1 (sweeps run only when a test calls
 * `gateway.sweep()`); `now` is the execution slice's clock (when a report was received),
 * `rateLimitNow` the rate limiter's.
 */
export async function startGatewayApp(
  t: TestContext,
  options: {
    env?: Record<string, string>;
    db?: Database;
    gpuSamples?: (machineId: string, gpus: HeartbeatMessage['gpus']) => void;
    now?: () => Date;
    rateLimitNow?: () => number;
    /** Every GPU challenge's plan, in place of each class's (a real class's takes minutes on the CPU). */
    challengePlan?: ChallengePlan;
  } = {},
): Promise<GatewayTestApp> {
  const test = await buildTestApp(t, { env: { GF_HEARTBEAT_SECONDS: '5', ...options.env }, ...(options.db ? { db: options.db } : {}), ...(options.rateLimitNow ? { now: options.rateLimitNow } : {}) });
  const calls: LifecycleCall[] = [];
  const { log, lines: logs } = captureLog();
  const metrics = createControlPlaneMetrics();
  const deps: ExecutionDeps & { metrics: ControlPlaneMetrics; challengePlan?: ChallengePlan } = {
    db: test.db,
    escrow: null,
    config: test.config.execution,
    blobs: test.blobs,
    log,
    metrics,
    ...(options.now ? { now: options.now } : {}),
    ...(options.challengePlan ? { challengePlan: options.challengePlan } : {}),
  };
  const gateway = await createAgentGateway({
    app: test.app,
    deps,
    lifecycle: countingLifecycle(calls, executionLifecycle(deps)),
    sweepIntervalMs: 0,
    ...(options.gpuSamples ? { gpuSamples: options.gpuSamples } : {}),
  });
  const url = await test.app.listen({ port: 0, host: '127.0.0.1' });
  t.teardown(() => gateway.close());
  return { ...test, gateway, url, calls, logs, metrics };
}

/** Where the test farms' earnings go. */
const TEST_PAYOUT_ADDRESS = '0x00000000000000000000000000000000000000aa';

/** An enrollment token for a fresh farm (or `farmSlug`), in `us-east` at 0.45 USD per GPU hour. */
export async function newEnrollmentToken(db: Database, options: { farmSlug?: string; ttlSeconds?: number; price?: number | null } = {}): Promise<string> {
  const created = await createEnrollmentToken(db, {
    farmSlug: options.farmSlug ?? `farm-${randomBytes(4).toString('hex')}`,
    regionKey: 'us-east',
    pricePerGpuHourMicroUsd: options.price === undefined ? 450_000 : options.price,
    ttlSeconds: options.ttlSeconds ?? 3600,
    payoutAddress: TEST_PAYOUT_ADDRESS,
  });
  return created.token;
}

/** Enrolls a machine through `POST /agent/v1/enroll`. */
export async function enrollMachine(app: TestApp['app'], db: Database, inventory: MachineInventory = testInventory()): Promise<{ machineId: string; machineToken: string }> {
  const token = await newEnrollmentToken(db);
  const res = await app.inject({ method: 'POST', url: '/agent/v1/enroll', payload: enrollBody(token, inventory) });
  if (res.statusCode !== 201) throw new Error(`enroll answered ${res.statusCode}: ${res.body}`);
  return res.json() as { machineId: string; machineToken: string };
}

/** A job row (status MATCHING by default) of a fresh account, for assignments to point at. */
export async function insertJob(db: Database, status = 'MATCHING'): Promise<string> {
  const key = await createTestKey(db);
  const id = `job_${randomBytes(8).toString('hex')}`;
  await db.query(
    `INSERT INTO jobs (id, account_id, api_key_id, status, spec, spec_hash, gpu_count, workload_type, max_runtime_seconds,
       max_price_per_gpu_hour_micro_usd, min_billing_seconds, platform_fee_bps, estimate_low_micro_usd, estimate_high_micro_usd,
       max_cost_micro_usd, matched_classes, payment_kind, payment_token, payment_symbol, payment_decimals, max_payment, escrow_job_key)
     VALUES ($1, $2, $3, $4, '{}'::jsonb, 'h', 1, 'container', 600, 1000000, 60, 1000, 1, 2, 3, ARRAY['rtx-4090-24gb'], 'stable',
       '0x0000000000000000000000000000000000000001', 'USDC', 6, 3, $5)`,
    [id, key.accountId, key.keyId, status, `0x${randomBytes(32).toString('hex')}`],
  );
  return id;
}

export function assignmentSpec(assignmentId: string, jobId: string): AssignmentSpec {
  return {
    assignmentId,
    jobId,
    image: 'registry.local/canary',
    imageDigest: `sha256:${'a'.repeat(64)}`,
    command: ['sha256-chain', '10'],
    env: { GF_JOB_ID: jobId },
    gpus: [{ index: 0, uuid: 'GPU-sim-0-0000' }],
    cpuCores: null,
    ramBytes: null,
    maxRuntimeSeconds: 600,
    networkPolicy: { mode: 'none' },
    inputs: [],
    outputRules: [{ path: '/output', maxBytes: 1024 * 1024 }],
  };
}

/** An assignment row of `jobId` on `machineId` (GPU 0), as the matcher writes it. */
export async function insertAssignment(db: Database, params: { jobId: string; machineId: string; state?: string; offeredSecondsAgo?: number }): Promise<string> {
  const id = `asg_${randomBytes(8).toString('hex')}`;
  await db.query(
    `INSERT INTO assignments (id, job_id, machine_id, attempt, state, gpu_indices, class_id, gpu_model, price_per_gpu_hour_micro_usd, spec, offered_at)
     VALUES ($1, $2, $3, 1, $4, ARRAY[0], 'rtx-4090-24gb', 'NVIDIA GeForce RTX 4090', 450000, $5::jsonb, now() - make_interval(secs => $6))`,
    [id, params.jobId, params.machineId, params.state ?? 'offered', JSON.stringify(assignmentSpec(id, params.jobId)), params.offeredSecondsAgo ?? 0],
  );
  return id;
}

/**
 * A fresh machine enrolled with the gateway app `s` whose agent is linked and welcomed, holding a
 * running assignment of a RUNNING job (the job's current one); the socket closes at teardown.
 */
export async function agentWithRunningJob(t: TestContext, s: Pick<GatewayTestApp, 'app' | 'db' | 'url'>): Promise<{ agent: AgentSocket; machineId: string; jobId: string; assignmentId: string }> {
  const { machineId, machineToken } = await enrollMachine(s.app, s.db);
  const jobId = await insertJob(s.db, 'RUNNING');
  const assignmentId = await insertAssignment(s.db, { jobId, machineId, state: 'running' });
  await s.db.query('UPDATE jobs SET assignment_id = $2 WHERE id = $1', [jobId, assignmentId]);
  const agent = await AgentSocket.connect(s.url, machineToken);
  t.teardown(() => agent.close());
  agent.send(hello(testInventory(), [{ assignmentId, jobId, state: 'running', nextLogSeq: 0 }]));
  await agent.next('welcome');
  return { agent, machineId, jobId, assignmentId };
}

/**
 * A GPU challenge plan for tests whose scripted machines claim real classes: a real class's plan
 * takes minutes on the CPU (`runChallenge` plays it), this one a fraction of a second, in a
 * window an honest CPU on a loaded machine meets.
 */
/**
 * A challenge a test plays on the CPU in about a second. Its window is wide (60 s): the test
 * process computes it under whatever load the machine has, and an honest play that missed a 7 s
 * window failed machine-verification under a busy CI run. Lateness is tested with `TIGHT_CHALLENGE_PLAN`.
 */
export const TEST_CHALLENGE_PLAN: ChallengePlan = { m: 256, n: 256, k: 256, rounds: 3, checks: 16, expectedSeconds: 30, deadlineSeconds: 60 };
/** A challenge with a 1 s window, for a machine that commits late on purpose. */
export const TIGHT_CHALLENGE_PLAN: ChallengePlan = { m: 256, n: 256, k: 256, rounds: 1, checks: 16, expectedSeconds: 0.5, deadlineSeconds: 1 };

/** The canary image reference of apps that recompute customers' canary jobs (`GF_CANARY_IMAGE`); nothing pulls it here. */
export const TEST_CANARY_IMAGE = `registry.local/gpufarm/canary@sha256:${'c'.repeat(64)}`;

/** An `assignment.status` of `state` with every fact null but those in `extra` (`at`: now). */
export function statusMessage(assignmentId: string, state: AssignmentStatusMessage['state'], extra: Partial<AssignmentStatusMessage> = {}): AssignmentStatusMessage {
  return {
    type: 'assignment.status',
    assignmentId,
    state,
    at: new Date().toISOString(),
    imageDigest: null,
    startedAt: null,
    finishedAt: null,
    exitCode: null,
    oomKilled: null,
    timedOut: null,
    failure: null,
    outputs: null,
    record: null,
    lastLogSeq: null,
    ...extra,
  };
}

/**
 * Uploads `files` as the assignment's first output (a tar, `output-0`) with the machine's token,
 * as the agent does; answers the output as a `finished` report lists it.
 */
export async function uploadOutput(params: { url: string; machineToken: string; assignmentId: string; files: Record<string, string> }): Promise<NonNullable<AssignmentStatusMessage['outputs']>[number]> {
  const body = await tarOf(params.files);
  const sha256 = createHash('sha256').update(body).digest('hex');
  const res = await fetch(`${params.url}/agent/v1/assignments/${params.assignmentId}/outputs/output-0`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${params.machineToken}`, 'content-type': 'application/octet-stream', 'x-content-sha256': sha256 },
    body,
  });
  if (res.status !== 201) throw new Error(`the upload of ${params.assignmentId}'s output answered ${res.status}: ${await res.text()}`);
  return { path: '/output', name: 'output-0', sha256, sizeBytes: body.length };
}

/** How a scripted machine answers a GPU challenge: honestly, or with one of the cheats the server must catch. */
export interface ChallengePlay {
  /** Rows of each round left uncomputed (their leaves hash zeros instead): a machine that did part of C. */
  skipRows?: (round: number, row: number) => boolean;
  /** Commits these roots instead of the ones computed (by GPU), opening the computed rows' paths: a root that does not match its rows. */
  roots?: (uuid: string, computed: string) => string;
  /** Waits this long after the go before committing: a slower GPU. */
  delayMs?: number;
  /** The GPU time reported, per GPU (default: the time taken). */
  gpuSeconds?: number;
}

/**
 * Plays the machine's part of a GPU challenge on the CPU, as the agent does on a simulated
 * machine: takes `challenge.prepare`, says ready, computes every GPU's chain from the go seed
 * with shared's definitions (`play` makes it cheat), commits, and opens the rows asked.
 * Returns the challenge's id and the commitment sent.
 */
export async function runChallenge(agent: AgentSocket, play: ChallengePlay = {}): Promise<{ challengeId: string; roots: Record<string, string> }> {
  const prepare = await agent.next('challenge.prepare');
  const { challengeId, m, n, k, rounds } = prepare;
  agent.send({ type: 'challenge.ready', challengeId });
  const go = await agent.next('challenge.go', (g) => g.challengeId === challengeId);
  // performance.now(), not Date.now(): whole milliseconds could make the time reported exceed
  // the server's own measure of the same interval (it starts before and ends after ours).
  const started = performance.now();
  const preSeed = Buffer.from(prepare.preSeed, 'hex');
  const goSeed = Buffer.from(go.seed, 'hex');
  const levels = new Map<string, Buffer[][][]>();
  const roots: Record<string, string> = {};
  for (const { uuid } of prepare.gpus) {
    const bt = int8Matrix(seedFor('b', preSeed, uuid), n, k);
    let seed = seedFor('gpu', goSeed, uuid);
    const perRound: Buffer[][][] = [];
    for (let r = 0; r < rounds; r++) {
      const a = int8Matrix(seed, m, k);
      const leaves = Array.from({ length: m }, (_, i) =>
        leafHash(i, play.skipRows?.(r, i) ? new Int32Array(n) : productRow(a.subarray(i * k, (i + 1) * k), bt, n, k)),
      );
      const tree = merkleLevels(leaves);
      perRound.push(tree);
      const root = tree[tree.length - 1]![0]!;
      seed = nextRoundSeed(seed, root);
    }
    levels.set(uuid, perRound);
    const computed = perRound.map((tree) => tree[tree.length - 1]![0]!.toString('hex')).join('');
    roots[uuid] = play.roots ? play.roots(uuid, computed) : computed;
  }
  if (play.delayMs) await new Promise((resolve) => setTimeout(resolve, play.delayMs));
  const gpuSeconds = play.gpuSeconds ?? (performance.now() - started) / 1000;
  agent.send({ type: 'challenge.commit', challengeId, gpus: prepare.gpus.map((g) => ({ uuid: g.uuid, roots: roots[g.uuid]!, gpuSeconds })) });
  const open = await agent.nextOf(['challenge.open', 'challenge.cancel'], (o) => o.challengeId === challengeId);
  if (open.type === 'challenge.open') {
    agent.send({
      type: 'challenge.openings',
      challengeId,
      openings: open.rows.map((r) => ({ ...r, path: merklePath(levels.get(r.uuid)![r.round]!, r.row).map((h) => h.toString('hex')).join('') })),
    });
  }
  await agent.barrier();
  return { challengeId, roots };
}

const [GF_AGENT_NODE, ...GF_AGENT] = testCommand('agent');

/** Runs the real `gf-agent` CLI with only the given GF_AGENT_* settings (stdin is not a terminal). */
export function gfAgent(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GF_AGENT_')));
  return new Promise((resolve) => {
    execFile(GF_AGENT_NODE, [...GF_AGENT, ...args], { env: { ...base, ...env }, timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

import {
  AGENT_PROTOCOL_VERSION,
  AGENT_PROTOCOL_VERSIONS,
  CHALLENGE_PROTOCOL_VERSION,
  errorText,
  IMAGE_CACHE_PROTOCOL_VERSION,
  gpuHealthCountersKey,
  gpuHealthVerdict,
  machineHealthVerdict,
  type AgentMessage,
  type AssignmentSpec,
  type GpuHealthVerdict,
  type BenchmarkResult,
  type ChallengeGoMessage,
  type ChallengeOpenMessage,
  type ChallengePrepareMessage,
  type HeartbeatMessage,
  type HelloMessage,
  type ImageCacheReport,
  type ServerMessage,
  type WelcomeMessage,
} from '@gpufarm/shared';
import type { ChallengeStarter, GpuChallenge } from '../challenge/challenge.js';
import { simulatedChallenges } from '../challenge/cpu-challenge.js';
import { AgentLink, type LinkState } from '../link/agent-link.js';
import type { AcceptResult, AssignmentContext, AssignmentReport, AssignmentRunner } from '../link/assignment-runner.js';
import { ContactDeadline, DEFAULT_LOST_AFTER_SECONDS, partitionGraceSeconds } from '../link/contact-deadline.js';
import { LogShipper } from '../logs/shipper.js';
import type { AgentLog } from '../logger/logger.js';
import type { InventoryMonitor } from '../inventory/monitor.js';
import { inventoryKey, toWireInventory } from '../inventory/snapshot.js';
import { admitChallenge, refusalDuringChallenge } from './admission.js';

export interface DaemonDeps {
  inventory: InventoryMonitor;
  runner: AssignmentRunner;
  /** The last benchmark result, if any (sent in `hello`). */
  benchmark: () => BenchmarkResult | null;
  /** Called with what `status` shows, whenever it changes (the CLI writes status.json). */
  onStatus?: (status: DaemonStatus) => void;
  /** The daemon's log (`logger/`): bound to the machine id by `gf-agent run`. */
  log: AgentLog;
  now?: () => Date;
  /** Sees every assignment status report the daemon sends (the metrics count containers and uploads). */
  onReport?: (status: AssignmentReport) => void;
  /**
   * Starts GPU challenges: gpu-bench in a container on real GPUs (`dockerChallenges`), the CPU
   * on simulated ones (`cpuChallenge`). Default: simulated ones only (`simulatedChallenges`).
   */
  challenges?: ChallengeStarter;
  /**
   * The image cache: its report goes in `heartbeat.images` (protocol 8) whenever `version`
   * changed; `prepull` pulls the pre-pull list at start and while no assignment is held.
   */
  images?: {
    readonly version: number;
    report(): ImageCacheReport;
    prepull(busy: () => boolean): Promise<void>;
  };
}

/**
 * The longest a GPU challenge holds the machine, from `challenge.prepare` to its openings: past
 * it the agent stops the challenge and says so (the control plane's own deadlines are far
 * shorter; this only keeps a lost challenge from keeping jobs off the machine for good).
 */
export const CHALLENGE_HOLD_LIMIT_SECONDS = 900;

/** The GPU challenge the daemon runs: where it is in the protocol, and since when. */
interface ActiveChallenge {
  id: string;
  run: GpuChallenge;
  /** What the daemon waits for: the program to be ready, the control plane's go, the commitment, its open, the openings. */
  phase: 'preparing' | 'ready' | 'running' | 'committed' | 'opening';
  startedAt: number;
  holdTimer: NodeJS.Timeout;
}

export interface DaemonOptions {
  server: string;
  machineToken: string;
  agentVersion: string;
  spoolDir: string;
  logMemoryBytes: number;
  heartbeatIntervalSeconds: number;
  inventoryIntervalSeconds: number;
  reconnect: { initialMs: number; maxMs: number };
  /**
   * The partition grace's inputs besides the control plane's `welcome`: the operator's cap
   * (`partition_grace_seconds`, null: none) and the seconds a container's stop may take.
   * Default: no cap, and stops that take no time (a runner without containers).
   */
  partition?: { capSeconds: number | null; stopSeconds: number };
  flushIntervalMs?: number;
  flushBytes?: number;
  /** Overrides `CHALLENGE_HOLD_LIMIT_SECONDS`. */
  challengeHoldSeconds?: number;
  /** How often an idle machine goes over its pre-pull list (default `PREPULL_INTERVAL_SECONDS`). */
  prepullIntervalSeconds?: number;
}

/** How often an idle machine pulls what of its pre-pull list is missing (an image a job's pull evicted comes back). */
export const PREPULL_INTERVAL_SECONDS = 300;

export interface DaemonStatus {
  pid: number;
  link: LinkState;
  machineId: string | null;
  connections: number;
  lastWelcomeAt: string | null;
  lastHeartbeatAt: string | null;
  lastDownReason: string | null;
  health: { status: string; reason: string | null; gpuProbe: string } | null;
  gpus: number;
  /**
   * Each GPU's health verdict with its reasons, and the machine's, by the same rules as the
   * control plane (`shared/src/fleet/gpu-health.ts`); empty and null before the first read.
   */
  gpuHealth: Array<{ index: number; uuid: string | null; verdict: GpuHealthVerdict; reasons: string[] }>;
  machineVerdict: { verdict: GpuHealthVerdict; reasons: string[] } | null;
  /** Why XID errors cannot be read (the kernel log), null when they can. */
  kernelLogProblem: string | null;
  running: string[];
  draining: boolean;
  /** The image cache: images held (listed or not), bytes used and the budget; null without one. */
  imageCache: { images: number; usedBytes: number; budgetBytes: number } | null;
  updatedAt: string;
}

/**
 * `gf-agent run`: the link, heartbeats with live GPU figures, periodic inventory re-reads, the
 * log shipper, and assignments handed to the `AssignmentRunner` port. Restart-safe: at start the
 * runner restores what it finds, and `hello` reports it; unacked log lines are resent from the
 * server's last stored seq.
 */
export class AgentDaemon {
  readonly link: AgentLink;
  readonly logs: LogShipper;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private inventoryTimer: NodeJS.Timeout | null = null;
  private heartbeatMs: number;
  private sentInventoryKey: string | null = null;
  private readonly contexts = new Map<string, AssignmentContext>();
  /** Job of each assignment the daemon has seen (from `assign` and the runner's restore). */
  private readonly jobIds = new Map<string, string>();
  private readonly pendingReports: AgentMessage[] = [];
  /** The last status sent per held assignment: sent again after each reconnect (a drop can lose it in flight). */
  private readonly lastStatus = new Map<string, AgentMessage>();
  private refreshing = false;
  private draining = false;
  /** Stops running jobs once the control plane may have requeued them (made at `start`). */
  private deadline: ContactDeadline | null = null;
  /** When the last `hello` was sent (`performance.now()`): its `welcome` proves the server recorded it. */
  private helloSentAt = 0;
  /** The protocol version the last `welcome` chose: `heartbeat.gpuHealth` exists from 4. */
  private protocolVersion = 1;
  /** `gpuHealthCountersKey` of the GPU health last sent on this connection (null: send it). */
  private sentHealthKey: string | null = null;
  private readonly now: () => Date;
  private statusValue: DaemonStatus;
  /** The GPU challenge running now: while it runs, assignments are refused. */
  private challenge: ActiveChallenge | null = null;
  /** The image cache's `version` last sent on this connection (null: send it). */
  private sentImagesVersion: number | null = null;
  private prepullTimer: NodeJS.Timeout | null = null;
  private prepulling = false;

  constructor(private readonly deps: DaemonDeps, private readonly options: DaemonOptions) {
    this.now = deps.now ?? (() => new Date());
    this.heartbeatMs = options.heartbeatIntervalSeconds * 1000;
    this.link = new AgentLink({
      server: options.server,
      machineToken: options.machineToken,
      reconnect: options.reconnect,
      hello: () => this.hello(),
      onWelcome: (w) => this.onWelcome(w),
      onMessage: (m) => this.onMessage(m),
      onDelivered: (sentAt) => this.deadline?.heard(sentAt),
      onDown: (reason) => {
        deps.log.warn({ reason }, `link down: ${reason}; reconnecting`);
        // The control plane gives the challenge up with the link: its answers could not arrive.
        void this.endChallenge('stopped: the link to the control plane went down');
        deps.runner.setPartitioned(true);
        this.setStatus({ lastDownReason: reason });
      },
      onRefused: (reason) => {
        deps.log.error({ reason }, `link refused: ${reason}`);
        void this.endChallenge('stopped: the control plane refused the machine');
        // The control plane will not take this machine back: as for a partition, running jobs
        // go on until the grace runs out, then stop with their outputs kept.
        deps.runner.setPartitioned(true);
        this.setStatus({ lastDownReason: reason });
      },
      onInvalid: (problem) => deps.log.warn(`ignored an invalid message from the control plane: ${problem}`),
    });
    this.logs = new LogShipper(
      { isReady: () => this.link.ready, send: (m) => void this.link.send(m), bufferedAmount: () => this.link.bufferedAmount },
      { spoolDir: options.spoolDir, memoryBytes: options.logMemoryBytes, flushIntervalMs: options.flushIntervalMs, flushBytes: options.flushBytes },
    );
    this.statusValue = { pid: process.pid, link: 'idle', machineId: null, connections: 0, lastWelcomeAt: null, lastHeartbeatAt: null, lastDownReason: null, health: null, gpus: 0, gpuHealth: [], machineVerdict: null, kernelLogProblem: null, running: [], draining: false, imageCache: null, updatedAt: this.now().toISOString() };
  }

  get status(): DaemonStatus {
    return { ...this.statusValue, link: this.link.state, connections: this.link.connections };
  }

  async start(): Promise<void> {
    await this.refreshInventory();
    await this.deps.runner.restore((assignmentId, firstSeq) => this.context(assignmentId, firstSeq));
    // Until a welcome says otherwise, the control plane's defaults; restored jobs count from now.
    this.deadline = new ContactDeadline({
      graceSeconds: this.graceFor(DEFAULT_LOST_AFTER_SECONDS, this.heartbeatMs / 1000),
      onExpired: (seconds) => {
        this.deps.log.warn(`no heartbeat confirmed by the control plane for ${seconds} s (the partition grace): stopping running jobs before it can requeue them`);
        this.deps.runner.contactLost({ seconds });
      },
      onContact: () => this.deps.runner.contactLost(null),
    });
    this.link.start();
    this.inventoryTimer = setInterval(() => void this.refreshInventory(), this.options.inventoryIntervalSeconds * 1000);
    this.armHeartbeat();
    if (this.deps.images) {
      void this.prepull();
      this.prepullTimer = setInterval(() => void this.prepull(), (this.options.prepullIntervalSeconds ?? PREPULL_INTERVAL_SECONDS) * 1000);
    }
  }

  /** Pulls the pre-pull list while the machine is idle (no assignment, no challenge); never two at once. */
  private async prepull(): Promise<void> {
    if (this.prepulling || !this.deps.images || this.contexts.size > 0 || this.challenge) return;
    this.prepulling = true;
    try {
      await this.deps.images.prepull(() => this.contexts.size > 0 || this.challenge !== null);
    } catch (err) {
      this.deps.log.warn(`pre-pull failed: ${errorText(err)}`);
    } finally {
      this.prepulling = false;
    }
  }

  async stop(): Promise<void> {
    this.deadline?.stop();
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    if (this.inventoryTimer) clearInterval(this.inventoryTimer);
    if (this.prepullTimer) clearInterval(this.prepullTimer);
    this.logs.flush();
    this.logs.stop();
    await this.endChallenge('stopped: the agent is stopping');
    await this.deps.runner.close();
    await this.link.stop();
    this.setStatus({});
  }

  private armHeartbeat(): void {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = setInterval(() => void this.heartbeat(), this.heartbeatMs);
  }

  private async refreshInventory(): Promise<void> {
    // A slow probe must not stack refreshes.
    if (this.refreshing) return;
    this.refreshing = true;
    try {
      const snap = await this.deps.inventory.refresh();
      const now = this.now();
      const gpuHealth = snap.gpuHealth.map((r) => ({ index: r.index, uuid: r.uuid, ...gpuHealthVerdict(r, now) }));
      const machineVerdict = snap.simulated ? null : machineHealthVerdict({ machineUnhealthyReason: snap.health.status === 'unhealthy' ? (snap.health.reason ?? 'unhealthy') : null, gpus: gpuHealth });
      if (snap.kernelLogProblem !== this.statusValue.kernelLogProblem && snap.kernelLogProblem !== null) this.deps.log.warn(snap.kernelLogProblem);
      this.setStatus({ health: { status: snap.health.status, reason: snap.health.reason, gpuProbe: snap.health.gpuProbe }, gpus: snap.health.status === 'healthy' ? snap.detected.length : 0, gpuHealth, machineVerdict, kernelLogProblem: snap.kernelLogProblem });
    } catch (err) {
      this.deps.log.warn(`inventory refresh failed: ${errorText(err)}`);
    } finally {
      this.refreshing = false;
    }
  }

  private async hello(): Promise<HelloMessage> {
    const snap = this.deps.inventory.latest ?? (await this.deps.inventory.refresh());
    const inventory = toWireInventory(snap);
    this.sentInventoryKey = inventoryKey(inventory);
    // The runner lists what it holds, including assignments that finished while the link was
    // down; the log lines of any of them that the server lacks are resent after `welcome`.
    const running = await this.deps.runner.running();
    for (const r of running) this.jobIds.set(r.assignmentId, r.jobId);
    const listed = new Set(running.map((r) => r.assignmentId));
    for (const held of this.logs.assignments()) {
      const jobId = this.jobIds.get(held.assignmentId);
      if (!listed.has(held.assignmentId) && jobId !== undefined && held.unacked > 0) running.push({ assignmentId: held.assignmentId, jobId, state: 'exited', nextLogSeq: held.nextSeq });
    }
    this.helloSentAt = performance.now();
    return {
      type: 'hello',
      protocolVersion: AGENT_PROTOCOL_VERSION,
      supportedVersions: [...AGENT_PROTOCOL_VERSIONS],
      agentVersion: this.options.agentVersion,
      inventory,
      benchmark: this.deps.benchmark(),
      running,
      draining: this.draining,
    };
  }

  /** The partition grace for the control plane's requeue time (`link/contact-deadline.ts`). */
  private graceFor(lostAfterSeconds: number, heartbeatIntervalSeconds: number): number {
    return partitionGraceSeconds({ lostAfterSeconds, heartbeatIntervalSeconds, ...(this.options.partition ?? { capSeconds: null, stopSeconds: 0 }) });
  }

  private onWelcome(welcome: WelcomeMessage): void {
    this.protocolVersion = welcome.protocolVersion;
    this.sentHealthKey = null;
    this.sentImagesVersion = null;
    const lostAfter = welcome.lostAfterSeconds ?? DEFAULT_LOST_AFTER_SECONDS;
    const grace = this.graceFor(lostAfter, welcome.heartbeatIntervalSeconds);
    this.deps.log.info(
      `link up: machine ${welcome.machineId}, protocol ${welcome.protocolVersion}, heartbeat ${welcome.heartbeatIntervalSeconds} s; ` +
        `running jobs stop after ${grace} s without the control plane, which may requeue them after ${lostAfter} s${welcome.lostAfterSeconds ? '' : ' (its default; it did not say)'}`,
    );
    if (welcome.heartbeatIntervalSeconds * 1000 !== this.heartbeatMs) {
      this.heartbeatMs = welcome.heartbeatIntervalSeconds * 1000;
      this.armHeartbeat();
    }
    this.deadline?.setGraceSeconds(grace);
    this.deadline?.heard(this.helloSentAt);
    this.deps.runner.setPartitioned(false);
    this.setStatus({ machineId: welcome.machineId, lastWelcomeAt: this.now().toISOString() });
    this.logs.onReconnected(welcome.acked);
    // Status messages are idempotent on the server: the latest of each held assignment goes
    // again, then whatever queued while the link was down, in order.
    const queued = new Set(this.pendingReports);
    for (const message of this.lastStatus.values()) if (!queued.has(message)) this.send(message);
    while (this.pendingReports.length > 0 && this.send(this.pendingReports[0]!)) this.pendingReports.shift();
  }

  private onMessage(message: ServerMessage): void {
    switch (message.type) {
      case 'logs.ack':
        this.logs.onAck(message.assignmentId, message.seq);
        return;
      case 'assign':
        void this.onAssign(message.assignment);
        return;
      case 'cancel':
        this.deps.runner.cancel(message.assignmentId, message.reason).catch((err: unknown) => this.jobLog(message.assignmentId).warn(`cancel ${message.assignmentId} failed: ${errorText(err)}`));
        return;
      case 'drain':
        this.draining = !message.undrain;
        this.deps.log.info(this.draining ? `draining: ${message.reason ?? 'asked by the control plane'}` : 'drain lifted');
        this.setStatus({ draining: this.draining });
        return;
      case 'challenge.prepare':
      case 'challenge.go':
      case 'challenge.open':
      case 'challenge.cancel':
        if (this.protocolVersion < CHALLENGE_PROTOCOL_VERSION) {
          this.deps.log.warn(`ignored ${message.type}: the link speaks protocol ${this.protocolVersion}, and the GPU challenge needs ${CHALLENGE_PROTOCOL_VERSION}`);
          return;
        }
        if (message.type === 'challenge.prepare') this.onChallengePrepare(message);
        else if (message.type === 'challenge.go') this.onChallengeGo(message);
        else if (message.type === 'challenge.open') this.onChallengeOpen(message);
        else if (this.challenge?.id === message.challengeId) void this.endChallenge(`cancelled by the control plane: ${message.reason || 'no reason given'}`);
        return;
      case 'welcome':
        return;
    }
  }

  /**
   * `challenge.prepare`: refused (`challenge.failed`) unless the machine's GPUs are idle
   * (`admitChallenge`); otherwise the challenge starts and answers `challenge.ready` once set up.
   */
  private onChallengePrepare(message: ChallengePrepareMessage): void {
    const { type: _type, ...spec } = message;
    const snap = this.deps.inventory.latest;
    const refusal = admitChallenge(spec, {
      heldAssignments: [...this.contexts.keys()],
      draining: this.draining,
      activeChallengeId: this.challenge?.id ?? null,
      simulated: snap?.simulated ?? null,
      unhealthyReason: snap === null || snap.health.status === 'healthy' ? null : (snap.health.reason ?? 'unhealthy'),
      gpuUuids: snap?.health.status === 'healthy' ? snap.detected.map((g) => g.uuid) : [],
    });
    if (refusal !== null) {
      this.deps.log.info({ challengeId: spec.challengeId }, `challenge ${spec.challengeId}: refused: ${refusal}`);
      this.link.send({ type: 'challenge.failed', challengeId: spec.challengeId, reason: refusal });
      return;
    }
    const holdSeconds = this.options.challengeHoldSeconds ?? CHALLENGE_HOLD_LIMIT_SECONDS;
    const active: ActiveChallenge = {
      id: spec.challengeId,
      run: (this.deps.challenges ?? simulatedChallenges)(spec),
      phase: 'preparing',
      startedAt: performance.now(),
      holdTimer: setTimeout(() => this.failChallenge(active, `the challenge held the machine for ${holdSeconds} s without the control plane finishing it: stopped, so the machine takes jobs again`), holdSeconds * 1000),
    };
    this.challenge = active;
    this.deps.log.info(
      { challengeId: spec.challengeId },
      `challenge ${spec.challengeId}: started on ${spec.gpus.length} GPU${spec.gpus.length === 1 ? '' : 's'} ` +
        `(${spec.simulated ? 'simulated: on the CPU' : 'gpu-bench in a container'}), ${spec.m}x${spec.n}x${spec.k}, ${spec.rounds} rounds; assignments are refused until it ends`,
    );
    this.challengeStep(active, active.run.prepare(), 'ready', () => ({ type: 'challenge.ready', challengeId: active.id }));
  }

  /** `challenge.go`: the timed chain; answers `challenge.commit`. */
  private onChallengeGo(message: ChallengeGoMessage): void {
    const active = this.expectChallenge(message.challengeId, 'ready', 'go');
    if (!active) return;
    active.phase = 'running';
    this.challengeStep(active, active.run.go(message.seed), 'committed', (gpus) => ({ type: 'challenge.commit', challengeId: active.id, gpus }));
  }

  /** `challenge.open`: the rows' Merkle paths; answers `challenge.openings`, and the challenge is over. */
  private onChallengeOpen(message: ChallengeOpenMessage): void {
    const active = this.expectChallenge(message.challengeId, 'committed', 'open');
    if (!active) return;
    active.phase = 'opening';
    this.challengeStep(active, active.run.open(message.rows), null, (openings) => ({ type: 'challenge.openings', challengeId: active.id, openings }));
  }

  /**
   * The running challenge of `challengeId` when it waits for this message; otherwise answers
   * `challenge.failed` (and stops it, when it is the one running) and returns null.
   */
  private expectChallenge(challengeId: string, phase: ActiveChallenge['phase'], what: string): ActiveChallenge | null {
    const active = this.challenge;
    if (active?.id === challengeId && active.phase === phase) return active;
    if (active?.id === challengeId) {
      this.failChallenge(active, `${what} came while the machine was ${active.phase === 'preparing' ? 'still setting up' : `at another step (${active.phase})`}`);
    } else {
      this.link.send({ type: 'challenge.failed', challengeId, reason: `no challenge ${challengeId} runs on this machine (it ended, or never started here)` });
    }
    return null;
  }

  /**
   * Sends a step's answer once it resolves and moves to `next` (null: the challenge is done); a
   * step that fails fails the challenge. Nothing is sent for a challenge that ended meanwhile.
   */
  private challengeStep<T>(active: ActiveChallenge, work: Promise<T>, next: ActiveChallenge['phase'] | null, answer: (value: T) => AgentMessage): void {
    work.then(
      (value) => {
        if (this.challenge !== active) return;
        this.link.send(answer(value));
        if (next !== null) active.phase = next;
        else void this.endChallenge('openings sent');
      },
      (err: unknown) => {
        if (this.challenge === active) this.failChallenge(active, errorText(err));
      },
    );
  }

  /** Tells the control plane the challenge failed, and ends it. */
  private failChallenge(active: ActiveChallenge, reason: string): void {
    if (this.challenge !== active) return;
    this.link.send({ type: 'challenge.failed', challengeId: active.id, reason: reason.slice(0, 2000) });
    void this.endChallenge(`failed: ${reason}`);
  }

  /** Ends the running challenge, if any: its program stops and its GPUs are free; one log line says how it ended. */
  private async endChallenge(how: string): Promise<void> {
    const active = this.challenge;
    if (!active) return;
    this.challenge = null;
    clearTimeout(active.holdTimer);
    this.deps.log.info({ challengeId: active.id }, `challenge ${active.id}: ${how} (after ${((performance.now() - active.startedAt) / 1000).toFixed(1)} s); its GPUs are free`);
    await active.run.cancel().catch((err: unknown) => this.deps.log.warn({ challengeId: active.id }, `challenge ${active.id}: stopping its program failed: ${errorText(err)}`));
  }

  private async onAssign(spec: AssignmentSpec): Promise<void> {
    const reject = (reason: Extract<AcceptResult, { accepted: false }>['reason'] | 'internal', message: string) =>
      this.sendOrQueue({ type: 'assignment.rejected', assignmentId: spec.assignmentId, reason: reason === 'internal' ? 'not_ready' : reason, message });
    if (this.contexts.has(spec.assignmentId)) return reject('duplicate', `assignment ${spec.assignmentId} is already held by this machine`);
    if (this.draining) return reject('draining', 'the machine is draining and takes no new assignment');
    if (this.challenge) {
      const refusal = refusalDuringChallenge(this.challenge.id);
      return reject(refusal.reason, refusal.message);
    }
    const health = this.deps.inventory.latest?.health;
    if (health?.status !== 'healthy') return reject('unhealthy', `the machine is unhealthy: ${health?.reason ?? 'inventory not read yet'}`);
    this.jobIds.set(spec.assignmentId, spec.jobId);
    const ctx = this.context(spec.assignmentId, 0);
    try {
      const result = await this.deps.runner.accept(spec, ctx);
      if (result.accepted) {
        this.jobLog(spec.assignmentId).info(`assignment ${spec.assignmentId} accepted: job ${spec.jobId}, image ${spec.image}`);
        this.sendOrQueue({ type: 'assignment.accepted', assignmentId: spec.assignmentId });
        this.setStatus({});
      } else {
        this.jobLog(spec.assignmentId).info({ reason: result.reason }, `assignment ${spec.assignmentId} rejected: ${result.message}`);
        this.forget(spec.assignmentId);
        this.sendOrQueue({ type: 'assignment.rejected', assignmentId: spec.assignmentId, reason: result.reason, message: result.message });
      }
    } catch (err) {
      this.jobLog(spec.assignmentId).error(`assignment ${spec.assignmentId}: the runner failed: ${errorText(err)}`);
      this.forget(spec.assignmentId);
      reject('internal', `the runner failed: ${errorText(err)}`);
    }
  }

  /** The log of one assignment's lines, with its job's id once the daemon knows it. */
  private jobLog(assignmentId: string): AgentLog {
    const jobId = this.jobIds.get(assignmentId);
    return this.deps.log.child(jobId === undefined ? { assignmentId } : { jobId, assignmentId });
  }

  private context(assignmentId: string, firstSeq: number): AssignmentContext {
    const logs = this.logs.open(assignmentId, { firstSeq });
    const link = this.link;
    const ctx: AssignmentContext = {
      assignmentId,
      logs,
      report: (status: AssignmentReport) => {
        const message: AgentMessage = { type: 'assignment.status', assignmentId, at: this.now().toISOString(), ...status };
        this.deps.onReport?.(status);
        this.lastStatus.set(assignmentId, message);
        // The lines written so far go first: the server handles a link's messages in order, so
        // its line for this status (such as "uploading") lands after them in the job's log.
        this.logs.flush();
        this.sendOrQueue(message);
        if (status.state === 'finished' || status.state === 'failed') {
          // Keep the sink until the server has every line, then forget the assignment.
          void logs.drained().then(() => this.forget(assignmentId));
        }
      },
      get partitioned() {
        return !link.ready;
      },
    };
    this.contexts.set(assignmentId, ctx);
    return ctx;
  }

  private forget(assignmentId: string): void {
    this.contexts.get(assignmentId)?.logs.release();
    this.jobIds.delete(assignmentId);
    this.lastStatus.delete(assignmentId);
    this.contexts.delete(assignmentId);
    this.setStatus({});
  }

  /** Status and accept/reject messages are kept in order while the link is down. */
  private sendOrQueue(message: AgentMessage): void {
    if (this.pendingReports.length === 0 && this.send(message)) return;
    this.pendingReports.push(message);
  }

  /**
   * Sends a message as the protocol `welcome` chose reads it (older servers' strict schemas
   * refuse what they do not know): `outputNotes` exist from 5, the failure code `gpu_lost` from
   * 6 (`lost` before: also retried elsewhere, the machine excluded), the reject reason
   * `image_cache_full` from 8 (`not_ready` before: the job goes elsewhere all the same).
   */
  private send(message: AgentMessage): boolean {
    if (message.type === 'assignment.status' && message.failure?.code === 'gpu_lost' && this.protocolVersion < 6) {
      return this.send({ ...message, failure: { ...message.failure, code: 'lost' } });
    }
    if (message.type === 'assignment.rejected' && message.reason === 'image_cache_full' && this.protocolVersion < IMAGE_CACHE_PROTOCOL_VERSION) {
      return this.link.send({ ...message, reason: 'not_ready' });
    }
    if (message.type === 'assignment.status' && message.outputNotes && this.protocolVersion < 5) {
      const { outputNotes: _notes, ...older } = message;
      return this.link.send(older);
    }
    return this.link.send(message);
  }

  private async heartbeat(): Promise<void> {
    if (!this.link.ready) return;
    const snap = this.deps.inventory.latest;
    if (!snap) return;
    const inventory = toWireInventory(snap);
    const key = inventoryKey(inventory);
    const changed = key !== this.sentInventoryKey;
    // Only what changed besides the live figures, which `gpus` carries every time.
    const healthKey = this.protocolVersion >= 4 ? gpuHealthCountersKey(snap.gpuHealth) : null;
    const sendHealth = healthKey !== null && healthKey !== this.sentHealthKey;
    const imagesVersion = this.deps.images && this.protocolVersion >= IMAGE_CACHE_PROTOCOL_VERSION ? this.deps.images.version : null;
    const sendImages = imagesVersion !== null && imagesVersion !== this.sentImagesVersion;
    const message: HeartbeatMessage = {
      type: 'heartbeat',
      sentAt: this.now().toISOString(),
      health: snap.health,
      gpus: inventory.gpus.map((g) => ({ index: g.index, uuid: g.uuid, temperatureC: g.temperatureC, utilizationPercent: g.utilizationPercent, memoryUsedBytes: g.memoryUsedBytes, powerDrawWatts: g.powerDrawWatts })),
      inventory: changed ? inventory : null,
      runningAssignmentIds: [...this.contexts.keys()],
      draining: this.draining,
      // A server on protocol 3 or older refuses the unknown field; one on 4 or 5 the fields of 6.
      ...(sendHealth ? { gpuHealth: this.protocolVersion >= 6 ? snap.gpuHealth : snap.gpuHealth.map(({ persistenceMode: _p, fabric: _f, ...older }) => older) } : {}),
      ...(sendImages ? { images: this.deps.images!.report() } : {}),
    };
    if (this.link.send(message)) {
      // Its pong says the heartbeat arrived: the partition grace counts from it.
      this.link.ping();
      if (changed) this.sentInventoryKey = key;
      if (sendHealth) this.sentHealthKey = healthKey;
      if (sendImages) this.sentImagesVersion = imagesVersion;
      this.setStatus({ lastHeartbeatAt: message.sentAt });
    }
  }

  private setStatus(patch: Partial<DaemonStatus>): void {
    const cache = this.deps.images?.report();
    const imageCache = cache ? { images: cache.images.length + cache.omitted, usedBytes: cache.usedBytes, budgetBytes: cache.budgetBytes } : null;
    this.statusValue = { ...this.statusValue, ...patch, running: [...this.contexts.keys()], draining: this.draining, imageCache, updatedAt: this.now().toISOString() };
    this.deps.onStatus?.(this.status);
  }
}

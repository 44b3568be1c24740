import {
  AGENT_CLOSE_CODES,
  AGENT_PROTOCOL_VERSIONS,
  agentMessageSchema,
  CHALLENGE_PROTOCOL_VERSION,
  type ChallengeCommitMessage,
  type ChallengeOpeningsMessage,
  assignMessageSchema,
  serverMessageSchema,
  type AgentMessage,
  gpuHealthCountersKey,
  type GpuHealthReport,
  IMAGE_CACHE_PROTOCOL_VERSION,
  type HeartbeatMessage,
  type HelloMessage,
  type LogBatchLine,
  type LogsMessage,
  MACHINE_NOTE_PREFIX,
  type ServerMessage,
} from '@gpufarm/shared';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { WebSocket } from 'ws';
import { z } from 'zod';
import { isDatabaseUnavailable } from '../db/errors.js';
import { recordFleetEvent } from '../fleet/events.js';
import { judgeReports, verdictKey, withLiveFigures, type JudgedGpu } from '../fleet/gpu-health.js';
import { insertAgentLines, lastStoredSeqs } from '../logs/store.js';
import { holdSupersededGpus, releaseSupersededGpus, writeGpuVerdicts } from '../machines/gpus-store.js';
import { drainRequest, writeGpuReports } from '../machines/store.js';
import { checkChallengeOpenings, judgeCommit, scheduleChallenges } from '../machine-verification/challenge.js';
import { drawRows, earlierRoots, findChallenge, finishChallenge, markGo, openChallenges, recordCommit, type ChallengeOutcome, type ChallengeRow } from '../machine-verification/challenge-store.js';
import type { DispatchNotice } from '../dispatch/notice.js';
import { recordPhases } from '../phases/record.js';
import type { GatewayDeps, LifecyclePort } from './lifecycle-port.js';
import { deleteImageReport, writeImageReport } from './image-store.js';
import { applyHeartbeatRow, applyHello, findAssignments, findLogTarget, heartbeatBeat, liveAssignments, recordHeartbeat, type AssignmentRow } from './machine-store.js';
import type { HeartbeatBeat, HeartbeatSeen, HeartbeatWriter } from '../machines/store.js';
import { frameGpusText } from './frame-gpus.js';
import { lostAfterSeconds } from './sweeper.js';
import { verdictsHold, verdictWindow, type VerdictWindow } from './steady-verdicts.js';
import type { Logger } from '../logger.js';

/**
 * One agent's WebSocket, after its machine token was checked.
 * Messages are handled one at a time, in arrival order; each is parsed with the shared schema
 * and an invalid one closes the link with 4400 and the field at fault. Nothing but `hello` is
 * taken before `welcome`, and `hello` once per link (a second closes it with 4400: each would
 * rewrite the machine's inventory and redo the restore); notices for the machine that arrive
 * meanwhile wait for it. A link that sends no `hello` by `helloBy` is closed with 4408.
 */

export interface LinkContext {
  deps: GatewayDeps;
  lifecycle: LifecyclePort;
  log: Logger;
  /** Takes each heartbeat's GPU figures for the history (summed in memory, written per minute). */
  gpuSamples?: (machineId: string, gpus: HeartbeatMessage['gpus']) => void;
  /** Writes heartbeats, several machines' in one statement (`heartbeatWriter`), shared by the gateway's links. */
  writeBeat: HeartbeatWriter;
  /** When (epoch ms) the link must have sent its `hello`: the end of its handshake (GF_AGENT_HANDSHAKE_MS). */
  helloBy?: number;
}

/**
 * The agent messages' schema compiled by zod (`z.compile`): the same checks, and on a failure the
 * runtime parser's own issues, at a tenth of its cost; a heartbeat from every machine every
 * 10 s made the runtime parser the largest part of the gateway's CPU.
 */
export const agentMessageParser = z.compile(agentMessageSchema);

const LIVE_STATES = new Set<AssignmentRow['state']>(['offered', 'accepted', 'running']);

/**
 * How long after its assignment ended (finished, failed, lost, canceled…) an agent's log lines
 * are still stored: the container's last lines while it is stopped (the agent's 10 s stop grace)
 * and a batch in flight. Later lines are acked and dropped, so a machine cannot append to a job
 * that is over, and its outbox lets go of them.
 */
export const LOG_LINES_GRACE_SECONDS = 60;

/** The agent's lines as stored: a line claiming `system` becomes the machine's note on `stderr` (`MACHINE_NOTE_PREFIX`). */
function asMachineLines(lines: readonly LogBatchLine[]): { lines: LogBatchLine[]; restreamed: number } {
  let restreamed = 0;
  const out = lines.map((l) => {
    if (l.stream !== 'system') return l;
    restreamed++;
    return { ...l, stream: 'stderr' as const, line: `${MACHINE_NOTE_PREFIX}${l.line}` };
  });
  return { lines: out, restreamed };
}
/** A WebSocket close reason is at most 123 bytes. */
const MAX_CLOSE_REASON_BYTES = 123;

function closeReason(text: string): string {
  let out = text;
  while (Buffer.byteLength(out, 'utf8') > MAX_CLOSE_REASON_BYTES) out = out.slice(0, -1);
  return out;
}

/** The first schema problem, named by message type and field path (`heartbeat: gpus.0.index: …`). */
function describeInvalid(raw: unknown, issues: ReadonlyArray<{ path: readonly PropertyKey[]; message: string }>): string {
  const type = typeof raw === 'object' && raw !== null && typeof (raw as { type?: unknown }).type === 'string' ? (raw as { type: string }).type : 'message';
  const issue = issues[0];
  if (!issue) return `${type}: invalid`;
  const field = issue.path.map(String).join('.') || 'message';
  return `${type}: ${field}: ${issue.message}`;
}

/** The assignment as an agent on `version` reads it: `deterministic` exists from protocol 3. */
function assignmentForVersion(spec: unknown, version: number): unknown {
  if (version >= 3 || typeof spec !== 'object' || spec === null) return spec;
  const { deterministic: _deterministic, ...older } = spec as Record<string, unknown>;
  return older;
}

export class AgentConnection {
  private welcomed = false;
  /** A `hello` arrived (it may still be being handled): any other is refused. */
  private helloSeen = false;
  private helloTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private chain: Promise<void> = Promise.resolve();
  /** Tasks on `chain` not yet done: a steady heartbeat skips the chain only when it is idle. */
  private tasks = 0;
  /**
   * A steady heartbeat whose beat is being written (`steadyHeartbeat`): it is handled outside
   * `chain`, so what comes meanwhile waits behind `gate`, made when something first does.
   */
  private beat: { message: HeartbeatMessage; reported: HeartbeatBeat['reported']; gate: Promise<void> | null; open: ((after?: Promise<void>) => void) | null } | null = null;
  private pending: DispatchNotice[] = [];
  /** Assignments sent on this socket (so a notice and the hello resend do not send one twice). */
  private readonly sent = new Set<string>();
  /** Job of each assignment known to be this machine's. */
  private readonly jobs = new Map<string, string>();
  /**
   * Assignments the agent said it holds although the control plane ended them (requeued while
   * the machine was cut off): their GPUs stay reserved until the agent lets go of them.
   */
  private readonly superseded = new Set<string>();
  /** Assignments whose first own line this link has passed to `phases/` (the row keeps only the first anyway). */
  private readonly firstLineSeen = new Set<string>();
  private lastHeardMs = Date.now();
  /** The protocol version chosen in `welcome`. */
  private protocolVersion = 1;
  /** What this link last stored of the GPU health (`verdictKey`, `countersKey`): heartbeats write only changes. */
  private storedVerdicts: string | null = null;
  private storedCounters: string | null = null;
  /** The verdicts last judged from `lastReports`, and while they stand (`steady-verdicts.ts`). */
  private standing: VerdictWindow | null = null;
  /** The GPU health reports last sent on this link (a heartbeat without them means unchanged). */
  private lastReports: GpuHealthReport[] | null = null;
  /** The GPUs the agent last claimed (hello, or a heartbeat's new inventory): heartbeats are judged against them. */
  private claimed: Pick<HelloMessage['inventory'], 'gpus' | 'simulated'> | null = null;
  /** When (performance.now()) each challenge's go was sent on this link: its commitment is timed from it. */
  private readonly goSentAt = new Map<string, number>();
  /** Challenges prepared on this link (a hello's own start and its notice do not send one twice). */
  private readonly challengesSent = new Set<string>();

  constructor(
    readonly ws: WebSocket,
    readonly machineId: string,
    private readonly ctx: LinkContext,
  ) {
    ws.on('message', (data, isBinary) => this.onRaw(isBinary ? null : data.toString()));
    ws.on('ping', () => {
      this.lastHeardMs = Date.now();
    });
    if (ctx.helloBy !== undefined) {
      this.helloTimer = setTimeout(() => this.close(AGENT_CLOSE_CODES.timeout, 'no hello within the handshake time; send hello as soon as the link opens'), Math.max(0, ctx.helloBy - Date.now()));
    }
    ws.on('close', (code, reason) => {
      this.closed = true;
      clearTimeout(this.helloTimer);
      // A link replaced by the machine's newer one, or closed as this server stops, is no outage.
      if (this.welcomed && code !== AGENT_CLOSE_CODES.replaced && code !== 1001) {
        const why = reason.toString() || 'the connection closed';
        recordFleetEvent(ctx.deps.db, { type: 'link.down', machineId, message: `agent link down (${code}): ${why}`, details: { code, reason: why } }).catch((err: unknown) =>
          ctx.log.warn({ machineId, err }, `machine ${machineId}: recording its link down failed`),
        );
      }
    });
    ws.on('error', () => {});
  }

  /** Closes the link when nothing (heartbeat, ping or message) was heard for `silentMs`: it is dead even if TCP is not. */
  closeIfSilent(nowMs: number, silentMs: number): void {
    if (nowMs - this.lastHeardMs > silentMs) this.close(AGENT_CLOSE_CODES.timeout, 'no heartbeat or message within three heartbeat intervals');
  }

  /** Closes the link (code and reason sent to the agent). */
  close(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.helloTimer);
    this.ws.close(code, closeReason(reason));
  }

  /** Resolves once every message received so far is handled. */
  idle(): Promise<void> {
    this.gateOnBeat();
    return this.chain;
  }

  /** A dispatch notice for this machine (`assign` or `cancel`); `null`: notices may have been missed, resend offers. */
  dispatch(notice: DispatchNotice | null): void {
    this.enqueue(async () => {
      if (!this.welcomed) {
        if (notice) this.pending.push(notice);
        return;
      }
      await this.handleNotice(notice);
    });
  }

  private enqueue(task: () => Promise<void>): void {
    this.gateOnBeat();
    this.tasks++;
    this.chain = this.chain.then(() => this.settle(task()));
  }

  /** `work`, counted among the tasks until it settles; a failure is logged (and ends the link when the database is away). */
  private settle(work: Promise<void>): Promise<void> {
    return work.catch((err: unknown) => {
      this.ctx.log.warn({ machineId: this.machineId, err }, `agent link of ${this.machineId}: handling failed`);
      // The message is lost unless the agent sends it again, and a later batch's cumulative
      // logs.ack would cover lines never stored: end the link so nothing after it is handled;
      // the reconnect's welcome says which lines to resend.
      if (isDatabaseUnavailable(err)) this.close(AGENT_CLOSE_CODES.unavailable, 'the control plane cannot reach its database; reconnect and send again');
    }).finally(() => {
      this.tasks--;
    });
  }

  /** Makes what is enqueued from now on wait for the steady heartbeat being written, if one is. */
  private gateOnBeat(): void {
    const beat = this.beat;
    if (!beat || beat.gate) return;
    beat.gate = new Promise<void>((resolve) => {
      beat.open = resolve;
    });
    const gate = beat.gate;
    this.chain = this.chain.then(() => gate);
  }

  /**
   * A heartbeat that changes nothing but the beat, taken without the chain's promises: nothing
   * is queued or being handled on the link, it carries no inventory, GPU health reports or image
   * report, no superseded assignment waits for it, and its GPUs' verdicts are as stored. Its beat
   * goes to the shared writer; what the writer saw decides the rest (`beatWritten`), before any
   * message that came meanwhile. False: the heartbeat takes the chain (`handle`).
   */
  private steadyHeartbeat(message: HeartbeatMessage, frame: string): boolean {
    if (this.tasks > 0 || this.beat !== null || this.claimed === null || message.inventory !== null || message.gpuHealth !== undefined || this.superseded.size > 0) return false;
    if (message.images && this.protocolVersion >= IMAGE_CACHE_PROTOCOL_VERSION) return false;
    if (this.lastReports !== null && !this.verdictsStand(this.lastReports, message.gpus)) return false;
    // The frame's own text of the figures: the writer need not serialize them again.
    const beat = heartbeatBeat(this.machineId, message, this.claimed, frameGpusText(frame));
    this.beat = { message, reported: beat.reported, gate: null, open: null };
    this.ctx.writeBeat.send(beat, this.beatWritten, this.beatFailed);
    return true;
  }

  /**
   * Whether the last reports with these live figures give the verdicts stored: judged again
   * only when a figure crossed a threshold or a warning XID's window ended (`verdictsHold`).
   */
  private verdictsStand(lastReports: readonly GpuHealthReport[], live: HeartbeatMessage['gpus']): boolean {
    const nowMs = Date.now();
    const standing = this.standing !== null && verdictsHold(this.standing, lastReports, live, nowMs) ? this.standing : this.judge(withLiveFigures(lastReports, live), nowMs).standing;
    return standing.key === this.storedVerdicts;
  }

  /** Judges `reports` (live figures in) as of `nowMs`; the verdicts stand until `standing` says otherwise. */
  private judge(reports: readonly GpuHealthReport[], nowMs: number): { judged: JudgedGpu[]; standing: VerdictWindow } {
    const judged = judgeReports(reports, new Date(nowMs));
    this.standing = verdictWindow(reports, verdictKey(judged), nowMs);
    return { judged, standing: this.standing };
  }

  private readonly beatWritten = (row: HeartbeatSeen): void => {
    const beat = this.beat!;
    this.beat = null;
    if (row === 'unchanged') {
      this.ctx.gpuSamples?.(this.machineId, beat.message.gpus);
      beat.open?.();
      return;
    }
    // The status or reason changed, or the machine is gone: written before anything that came meanwhile.
    this.tasks++;
    const after = this.settle(this.afterBeat(beat.message, beat.reported, row));
    if (beat.open) beat.open(after);
    else this.chain = this.chain.then(() => after);
  };

  private readonly beatFailed = (err: unknown): void => {
    const beat = this.beat!;
    this.beat = null;
    this.tasks++;
    const after = this.settle(Promise.reject(err));
    if (beat.open) beat.open(after);
    else this.chain = this.chain.then(() => after);
  };

  /** A steady heartbeat's rest, once its beat is written and the row said something changed. */
  private async afterBeat(message: HeartbeatMessage, reported: HeartbeatBeat['reported'], row: HeartbeatSeen): Promise<void> {
    if (!(await applyHeartbeatRow(this.ctx.deps.db, this.machineId, message, row, { reported, lostIndexes: [] }))) {
      this.close(AGENT_CLOSE_CODES.unauthorized, 'the machine was disabled or removed by an operator');
      return;
    }
    this.ctx.gpuSamples?.(this.machineId, message.gpus);
  }

  private onRaw(text: string | null): void {
    if (this.closed) return;
    this.lastHeardMs = Date.now();
    const notJson = 'message: not a JSON text frame';
    if (text === null) {
      this.close(AGENT_CLOSE_CODES.invalidMessage, notJson);
      return;
    }
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      this.close(AGENT_CLOSE_CODES.invalidMessage, notJson);
      return;
    }
    const parsed = agentMessageParser.safeParse(raw);
    if (!parsed.success) {
      this.close(AGENT_CLOSE_CODES.invalidMessage, describeInvalid(raw, parsed.error.issues));
      return;
    }
    const message = parsed.data;
    if (message.type === 'hello') {
      if (this.helloSeen) {
        this.close(AGENT_CLOSE_CODES.invalidMessage, 'hello: sent twice on one link; one hello per connection (reconnect to send a new one)');
        return;
      }
      this.helloSeen = true;
      clearTimeout(this.helloTimer);
    } else if (!this.welcomed) {
      this.close(AGENT_CLOSE_CODES.invalidMessage, `${message.type}: sent before welcome; hello comes first`);
      return;
    }
    if (message.type === 'heartbeat' && this.steadyHeartbeat(message, text)) return;
    this.enqueue(() => this.handle(message));
  }

  private send(message: ServerMessage): void {
    if (this.closed || this.ws.readyState !== this.ws.OPEN) return;
    this.ws.send(JSON.stringify(serverMessageSchema.parse(message)));
  }

  private async handle(message: AgentMessage): Promise<void> {
    if (this.closed) return;
    const { deps, lifecycle } = this.ctx;
    switch (message.type) {
      case 'hello':
        return this.onHello(message);
      case 'heartbeat': {
        // A GPU the agent reports lost is missing from its inventory but keeps its row (and verdict).
        const lostIndexes = (message.gpuHealth ?? this.lastReports ?? []).filter((r) => r.lost).map((r) => r.index);
        if (!(await recordHeartbeat(deps.db, this.machineId, message, { write: this.ctx.writeBeat, claimed: this.claimed, lostIndexes }))) {
          this.close(AGENT_CLOSE_CODES.unauthorized, 'the machine was disabled or removed by an operator');
          return;
        }
        // A new inventory may have added GPU rows (judged healthy until told otherwise).
        if (message.inventory !== null) {
          this.claimed = message.inventory;
          this.storedVerdicts = null;
        }
        await this.onGpuHealth(message);
        // Sent only when the cache changed: stored as it comes, never on a heartbeat without one.
        if (message.images && this.protocolVersion >= IMAGE_CACHE_PROTOCOL_VERSION) await writeImageReport(deps.db, this.machineId, message.images);
        this.ctx.gpuSamples?.(this.machineId, message.gpus);
        if (this.superseded.size > 0) {
          const listed = new Set(message.runningAssignmentIds);
          await this.letGo([...this.superseded].filter((id) => !listed.has(id)));
        }
        return;
      }
      case 'logs':
        return this.onLogs(message);
      case 'assignment.accepted':
        if (await this.owns(message.assignmentId)) await lifecycle.assignmentAccepted(this.machineId, message.assignmentId);
        return;
      case 'assignment.rejected':
        if (await this.owns(message.assignmentId)) await lifecycle.assignmentRejected(this.machineId, message.assignmentId, message.reason, message.message);
        return;
      case 'assignment.status':
        if (await this.owns(message.assignmentId)) await lifecycle.assignmentStatus(this.machineId, message);
        if (this.superseded.has(message.assignmentId) && (message.state === 'finished' || message.state === 'failed')) await this.letGo([message.assignmentId]);
        return;
      case 'challenge.ready':
        return this.onChallengeReady(message.challengeId);
      case 'challenge.commit':
        return this.onChallengeCommit(message);
      case 'challenge.openings':
        return this.onChallengeOpenings(message);
      case 'challenge.failed': {
        const challenge = await this.ownChallenge(message.challengeId, ['preparing', 'running', 'opening']);
        if (challenge) await this.endChallenge(challenge.id, { passed: false, reason: `the machine could not run the challenge: ${message.reason}`, declined: true }, false);
        return;
      }
    }
  }

  /**
   * The machine's challenge in one of `states`, or null: a message about any other is stale
   * (decided, given up, or not this machine's), and the agent is told to stop it.
   */
  private async ownChallenge(challengeId: string, states: ReadonlyArray<ChallengeRow['state']>): Promise<ChallengeRow | null> {
    const challenge = await findChallenge(this.ctx.deps.db, challengeId);
    if (challenge && challenge.machineId === this.machineId && states.includes(challenge.state)) return challenge;
    this.send({ type: 'challenge.cancel', challengeId, reason: challenge?.machineId === this.machineId ? `the challenge is ${challenge.state}` : 'no such challenge for this machine' });
    return null;
  }

  /** Records the challenge's outcome; a failure is also sent to the agent as a cancel (it frees the GPUs). */
  private async endChallenge(challengeId: string, outcome: ChallengeOutcome, tellAgent: boolean): Promise<void> {
    this.goSentAt.delete(challengeId);
    const { next } = await finishChallenge(this.ctx.deps.db, challengeId, outcome);
    if (!outcome.passed) this.ctx.log.warn({ machineId: this.machineId, challengeId, reason: outcome.reason }, `machine ${this.machineId}: GPU challenge ${challengeId} failed: ${outcome.reason}`);
    if (tellAgent && !outcome.passed) this.send({ type: 'challenge.cancel', challengeId, reason: outcome.reason.slice(0, 500) });
    // The machine's next class of GPUs.
    if (next !== null) await this.sendChallenge(next);
  }

  /** A challenge to put to the machine: `challenge.prepare`, when its agent speaks the protocol. */
  private async sendChallenge(challengeId: string): Promise<void> {
    const challenge = await findChallenge(this.ctx.deps.db, challengeId);
    if (!challenge || challenge.machineId !== this.machineId || challenge.state !== 'preparing' || this.challengesSent.has(challengeId)) return;
    this.challengesSent.add(challengeId);
    if (this.protocolVersion < CHALLENGE_PROTOCOL_VERSION) {
      const reason = `the agent speaks protocol ${this.protocolVersion}, and proving GPUs needs ${CHALLENGE_PROTOCOL_VERSION}: upgrade the agent`;
      return this.endChallenge(challengeId, { passed: false, reason }, false);
    }
    const { m, n, k, rounds, gpus, preSeed, simulated } = challenge;
    this.send({ type: 'challenge.prepare', challengeId, gpus, m, n, k, rounds, preSeed, simulated });
  }

  /** Ready: the fresh go seed, stored before it is sent; the clock starts as it goes. */
  private async onChallengeReady(challengeId: string): Promise<void> {
    const challenge = await this.ownChallenge(challengeId, ['preparing']);
    if (!challenge) return;
    const seed = randomBytes(32).toString('hex');
    if (!(await markGo(this.ctx.deps.db, challengeId, seed))) return;
    this.goSentAt.set(challengeId, performance.now());
    this.send({ type: 'challenge.go', challengeId, seed });
  }

  /** The commitment: judged (GPUs, rounds, time, replay), then the rows drawn and asked. */
  private async onChallengeCommit(message: ChallengeCommitMessage): Promise<void> {
    const arrived = performance.now();
    const challenge = await this.ownChallenge(message.challengeId, ['running']);
    if (!challenge) return;
    const sentAt = this.goSentAt.get(challenge.id);
    if (sentAt === undefined) return this.endChallenge(challenge.id, { passed: false, reason: 'the commitment came on another link than the go' }, true);
    const elapsedSeconds = (arrived - sentAt) / 1000;
    const reason = judgeCommit(challenge, message, elapsedSeconds, await earlierRoots(this.ctx.deps.db, this.machineId, challenge.id));
    const roots = Object.fromEntries(message.gpus.map((g) => [g.uuid, g.roots]));
    const gpuSeconds = Object.fromEntries(message.gpus.map((g) => [g.uuid, g.gpuSeconds]));
    const rows = reason === null ? drawRows(challenge) : [];
    if (!(await recordCommit(this.ctx.deps.db, challenge.id, { roots, gpuSeconds, elapsedMs: elapsedSeconds * 1000, opened: rows }))) return;
    if (reason !== null) return this.endChallenge(challenge.id, { passed: false, reason }, true);
    this.send({ type: 'challenge.open', challengeId: challenge.id, rows });
  }

  /** The opened rows: recomputed here; the challenge passes when every one leads to its root. */
  private async onChallengeOpenings(message: ChallengeOpeningsMessage): Promise<void> {
    const challenge = await this.ownChallenge(message.challengeId, ['opening']);
    if (!challenge) return;
    const { reason, checkMs } = await checkChallengeOpenings(challenge, message);
    await this.endChallenge(challenge.id, reason === null ? { passed: true, checkMs } : { passed: false, reason, checkMs }, false);
  }

  /** The job of `assignmentId` when it is this machine's (any state), else null (logged). */
  private async jobOf(assignmentId: string): Promise<string | null> {
    const known = this.jobs.get(assignmentId);
    if (known !== undefined) return known;
    const [row] = await findAssignments(this.ctx.deps.db, [assignmentId]);
    if (!row || row.machine_id !== this.machineId) {
      this.ctx.log.warn({ machineId: this.machineId, assignmentId }, `agent link of ${this.machineId}: assignment ${assignmentId} is not this machine's; message ignored`);
      return null;
    }
    this.jobs.set(assignmentId, row.job_id);
    return row.job_id;
  }

  private async owns(assignmentId: string): Promise<boolean> {
    return (await this.jobOf(assignmentId)) !== null;
  }

  private async onHello(hello: HelloMessage): Promise<void> {
    const { deps, lifecycle } = this.ctx;
    const supported: readonly number[] = AGENT_PROTOCOL_VERSIONS;
    const common = hello.supportedVersions.filter((v) => supported.includes(v));
    if (common.length === 0) {
      this.close(AGENT_CLOSE_CODES.unsupportedVersion, `no protocol version in common: the server speaks ${supported.join(', ')}`);
      return;
    }
    const heldIds = hello.running.map((r) => r.assignmentId);
    const held = new Map((await findAssignments(deps.db, heldIds)).map((a) => [a.id, a]));
    const mine = heldIds.filter((id) => held.get(id)?.machine_id === this.machineId);
    // Before the machine is online again, so no matcher can offer a GPU its agent still holds.
    const superseded = mine.filter((id) => !LIVE_STATES.has(held.get(id)!.state));
    await holdSupersededGpus(deps.db, this.machineId, superseded);
    for (const id of superseded) this.superseded.add(id);
    await applyHello(deps.db, this.machineId, hello);
    this.claimed = hello.inventory;
    const live = await liveAssignments(deps.db, this.machineId);
    const acked = await lastStoredSeqs(deps.db, mine);
    for (const a of [...live, ...held.values()]) if (a.machine_id === this.machineId) this.jobs.set(a.id, a.job_id);
    const version = Math.max(...common);
    this.protocolVersion = version;
    // An agent on an older protocol sends no image report: the one stored from a newer agent would only grow stale.
    if (version < IMAGE_CACHE_PROTOCOL_VERSION) await deleteImageReport(deps.db, this.machineId);
    await recordFleetEvent(deps.db, {
      type: 'link.up',
      machineId: this.machineId,
      message: `agent ${hello.agentVersion} connected (protocol ${version})`,
      details: { agentVersion: hello.agentVersion, protocolVersion: version, running: hello.running.length },
    });
    this.send({
      type: 'welcome',
      protocolVersion: version,
      supportedVersions: [...AGENT_PROTOCOL_VERSIONS],
      machineId: this.machineId,
      heartbeatIntervalSeconds: deps.config.heartbeatSeconds,
      serverTime: new Date().toISOString(),
      acked: hello.running.map((r) => ({ assignmentId: r.assignmentId, seq: acked.get(r.assignmentId) ?? null })),
      ...(version >= 2 ? { lostAfterSeconds: lostAfterSeconds(deps.config) } : {}),
    });
    this.welcomed = true;

    const heldSet = new Set(heldIds);
    for (const a of live) {
      if (heldSet.has(a.id)) continue;
      if (a.state === 'offered') this.sendAssign(a);
      else await lifecycle.assignmentLost(a.id, 'the agent restarted without it').catch((err: unknown) => this.ctx.log.warn({ machineId: this.machineId, jobId: a.job_id, assignmentId: a.id, err }, `assignment ${a.id}: marking it lost failed`));
    }
    for (const r of hello.running) {
      const a = held.get(r.assignmentId);
      if (a && a.machine_id === this.machineId && LIVE_STATES.has(a.state)) continue;
      const why = !a || a.machine_id !== this.machineId ? 'the control plane has no such assignment for this machine' : `the control plane considers this assignment ${a.state}`;
      this.send({ type: 'cancel', assignmentId: r.assignmentId, reason: why });
    }
    // A drain asked while the agent was away (or before it restarted) reaches it now.
    const drain = await drainRequest(deps.db, this.machineId);
    if (drain && !hello.draining) this.send({ type: 'drain', undrain: false, reason: drain.reason?.slice(0, 500) ?? null });
    // A challenge out when the agent connected again died with its previous link: it fails now
    // and a new one starts below.
    for (const c of await openChallenges(deps.db, this.machineId)) {
      await this.endChallenge(c.id, { passed: false, reason: 'the agent connected again while the challenge was out' }, false);
    }
    const pending = this.pending;
    this.pending = [];
    for (const notice of pending) await this.handleNotice(notice);
    // First enrollment, or a driver or GPU change (`applyHello`): the machine is offered once its GPUs are proven.
    const started = await scheduleChallenges({ db: deps.db, config: deps.config, log: this.ctx.log, ...(deps.challengePlan ? { challengePlan: deps.challengePlan } : {}) }, { machineId: this.machineId }).catch(
      (err: unknown) => {
        this.ctx.log.warn({ machineId: this.machineId, err }, `machine ${this.machineId}: starting its GPU challenge failed; the sweep tries again`);
        return [];
      },
    );
    for (const id of started) await this.sendChallenge(id);
  }

  /**
   * A heartbeat's GPU health reports (or, when it has none, the last ones with its live
   * temperature and utilization): the verdicts are judged here, stored when they changed
   * (a failed GPU leaves the offers from this heartbeat on), and an assignment on a GPU that
   * just failed is failed as the machine's fault (requeued or refunded) and its agent told to stop it.
   */
  private async onGpuHealth(message: HeartbeatMessage): Promise<void> {
    if (message.gpuHealth) this.lastReports = message.gpuHealth;
    if (this.lastReports === null) return;
    const { deps, lifecycle } = this.ctx;
    const reports = message.gpuHealth ?? withLiveFigures(this.lastReports, message.gpus);
    const { judged, standing } = this.judge(reports, Date.now());
    const verdicts = standing.key;
    const counters = message.gpuHealth ? gpuHealthCountersKey(reports) : this.storedCounters;
    if (verdicts !== this.storedVerdicts) {
      const failed = await writeGpuVerdicts(deps.db, this.machineId, judged);
      for (const f of failed) await lifecycle.assignmentGpuFailed(f.assignmentId, f.reason);
      this.storedVerdicts = verdicts;
    }
    // After the verdicts: stored reports always come with the verdicts judged from them.
    if (counters !== this.storedCounters) {
      await writeGpuReports(deps.db, this.machineId, reports);
      this.storedCounters = counters;
    }
  }

  /** The agent let go of superseded assignments: their GPUs can be offered again. */
  private async letGo(assignmentIds: string[]): Promise<void> {
    if (assignmentIds.length === 0) return;
    await releaseSupersededGpus(this.ctx.deps.db, this.machineId, assignmentIds);
    for (const id of assignmentIds) this.superseded.delete(id);
  }

  private sendAssign(a: AssignmentRow): void {
    if (this.sent.has(a.id)) return;
    const message = assignMessageSchema.safeParse({ type: 'assign', assignment: assignmentForVersion(a.spec, this.protocolVersion) });
    if (!message.success) {
      this.ctx.log.error({ machineId: this.machineId, jobId: a.job_id, assignmentId: a.id }, `assignment ${a.id}: its spec fails the assign schema (${describeInvalid({ type: 'assign' }, message.error.issues)}); not sent`);
      return;
    }
    this.sent.add(a.id);
    this.jobs.set(a.id, a.job_id);
    this.send(message.data);
  }

  private async handleNotice(notice: DispatchNotice | null): Promise<void> {
    const db = this.ctx.deps.db;
    if (notice === null) {
      for (const a of await liveAssignments(db, this.machineId)) if (a.state === 'offered') this.sendAssign(a);
      return;
    }
    if (notice.kind === 'drain') {
      this.send({ type: 'drain', undrain: notice.undrain, reason: notice.reason?.slice(0, 500) ?? null });
      return;
    }
    if (notice.kind === 'challenge') return this.sendChallenge(notice.challengeId);
    if (notice.kind === 'challenge.cancel') {
      this.send({ type: 'challenge.cancel', challengeId: notice.challengeId, reason: (notice.reason ?? 'given up by the control plane').slice(0, 500) });
      return;
    }
    if (notice.kind === 'cancel') {
      this.send({ type: 'cancel', assignmentId: notice.assignmentId, reason: (notice.reason ?? 'canceled by the control plane').slice(0, 500) });
      return;
    }
    const [a] = await findAssignments(db, [notice.assignmentId]);
    if (a && a.machine_id === this.machineId && a.state === 'offered') this.sendAssign(a);
  }

  /**
   * Stores a batch of the agent's lines when its assignment is this machine's and open for lines
   * (live, or ended within LOG_LINES_GRACE_SECONDS; after that only lines up to the `lastLogSeq`
   * its end reported, which the run wrote before it ended, however far its outbox lags), `system`
   * lines as the machine's `stderr`. Every batch is acked, stored or not: a refused one is
   * counted and logged, never an error that drops the link, and the agent's outbox lets go of it
   * instead of resending it forever.
   */
  private async onLogs(message: LogsMessage): Promise<void> {
    const { deps } = this.ctx;
    const target = await findLogTarget(deps.db, message.assignmentId, LOG_LINES_GRACE_SECONDS);
    const count = message.lines.length;
    const due = !target ? [] : target.open ? message.lines : message.lines.filter((l) => target.last_log_seq !== null && l.seq <= target.last_log_seq);
    if (!target || target.machine_id !== this.machineId) {
      deps.metrics?.agentLogLinesRefused('not_this_machine', count);
      this.ctx.log.warn({ machineId: this.machineId, assignmentId: message.assignmentId, lines: count }, `agent link of ${this.machineId}: assignment ${message.assignmentId} is not this machine's; ${count} log lines acked and dropped`);
    } else {
      if (due.length < count) {
        deps.metrics?.agentLogLinesRefused('assignment_ended', count - due.length);
        this.ctx.log.warn(
          { machineId: this.machineId, jobId: target.job_id, assignmentId: message.assignmentId, lines: count - due.length },
          `agent link of ${this.machineId}: assignment ${message.assignmentId} ended more than ${LOG_LINES_GRACE_SECONDS} s ago; ${count - due.length} log lines after its last reported one acked and dropped`,
        );
      }
      if (due.length > 0) await this.storeLines(target.job_id, message.assignmentId, due);
    }
    this.send({ type: 'logs.ack', assignmentId: message.assignmentId, seq: message.lines[message.lines.length - 1]!.seq });
  }

  private async storeLines(jobId: string, assignmentId: string, batch: readonly LogBatchLine[]): Promise<void> {
    const { deps } = this.ctx;
    const { lines, restreamed } = asMachineLines(batch);
    if (restreamed > 0) deps.metrics?.agentLogLinesRefused('system_stream', restreamed);
    const stored = await insertAgentLines(deps.db, { jobId, assignmentId, lines, capBytes: deps.config.logCapBytes });
    if (stored.bytes > 0) deps.metrics?.logBytes(stored.bytes);
    // The job's first own line (not a machine note) ends its first-log phase; once per assignment on this link.
    if (!this.firstLineSeen.has(assignmentId) && batch.some((l) => l.stream !== 'system')) {
      this.firstLineSeen.add(assignmentId);
      await recordPhases(deps, assignmentId, ['firstLogAt'], deps.now ? deps.now() : new Date());
    }
  }
}

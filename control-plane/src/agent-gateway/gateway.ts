import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { AGENT_WS_PATH, ERROR_CODES, type HeartbeatMessage } from '@gpufarm/shared';
import type { FastifyInstance } from 'fastify';
import { WebSocketServer, type WebSocket } from 'ws';
import { runSteps, startPeriodic } from '../background/periodic.js';
import { scheduleChallenges } from '../machine-verification/challenge.js';
import { finishChallenge, overdueChallenges } from '../machine-verification/challenge-store.js';
import { heartbeatWriter, markSilentMachinesOffline } from '../machines/store.js';
import { notifyAgent } from '../dispatch/store.js';
import { AGENT_DISPATCH_CHANNEL, type DispatchNotice } from '../dispatch/notice.js';
import type { GatewayDeps, LifecyclePort } from './lifecycle-port.js';
import { AgentConnection } from './link.js';
import { authenticateMachine } from '../auth/machine-tokens.js';
import { agentRoutes } from './routes.js';
import { z } from 'zod';
import { AGENT_LINKS_CHANNEL, announceAgentLink, assignmentsPastGrace, machinesWithLiveAssignments, unansweredOffers } from './store.js';
import { recordFleetEvents } from '../fleet/events.js';
import type { Logger } from '../logger.js';

/** Largest agent message (a full logs batch is well under it). */
const MAX_MESSAGE_BYTES = 16 * 1024 * 1024;

export interface AgentGatewayOptions {
  /** The app, before it listens: the enroll route is registered on it and the upgrade handler on its server. */
  app: FastifyInstance;
  deps: GatewayDeps;
  /** The job side of agent messages and sweeps (`execution/lifecycle.ts` `executionLifecycle`). */
  lifecycle: LifecyclePort;
  /** Liveness sweep period; `deps.config.sweepIntervalMs` by default; 0 runs no timer (tests call `sweep()`). */
  sweepIntervalMs?: number;
  /** Takes each heartbeat's GPU figures for the fleet history. */
  gpuSamples?: (machineId: string, gpus: HeartbeatMessage['gpus']) => void;
}

export interface AgentGateway {
  /** Stops the sweeper and the dispatch listener and closes every agent socket (1001). Idempotent. */
  close(): Promise<void>;
  /** Agents connected to this replica. */
  connectedMachines(): number;
  /** One liveness sweep now (also run every `sweepIntervalMs`). */
  sweep(): Promise<void>;
}

/** A newer link of a machine, announced by the replica that took it. */
const linkNoticeSchema = z.object({ machineId: z.string(), epoch: z.number().int() });

const REPLACED = 'another connection of this machine took over';

function parseNotice(payload: string): DispatchNotice | null | 'invalid' {
  if (payload === '') return null;
  try {
    const value = JSON.parse(payload) as { machineId?: unknown; assignmentId?: unknown; challengeId?: unknown; kind?: unknown; reason?: unknown; undrain?: unknown };
    const reason = typeof value.reason === 'string' ? { reason: value.reason } : {};
    if (typeof value.machineId !== 'string') return 'invalid';
    if (value.kind === 'drain') return typeof value.undrain === 'boolean' ? { machineId: value.machineId, kind: 'drain', undrain: value.undrain, ...reason } : 'invalid';
    if (value.kind === 'challenge' || value.kind === 'challenge.cancel') {
      if (typeof value.challengeId !== 'string') return 'invalid';
      return value.kind === 'challenge' ? { machineId: value.machineId, kind: 'challenge', challengeId: value.challengeId } : { machineId: value.machineId, kind: 'challenge.cancel', challengeId: value.challengeId, ...reason };
    }
    if (typeof value.assignmentId !== 'string' || (value.kind !== 'assign' && value.kind !== 'cancel')) return 'invalid';
    return { machineId: value.machineId, assignmentId: value.assignmentId, kind: value.kind, ...reason };
  } catch {
    return 'invalid';
  }
}

/** Seconds an agent refused for want of a handshake slot waits before it tries again (its own backoff adds to it). */
const UPGRADE_RETRY_SECONDS = 2;

/**
 * Answers an upgrade request with a plain HTTP error (the error envelope for 401) and closes the
 * socket once the answer is written: a client that keeps its half open holds nothing after it.
 */
function refuseUpgrade(socket: Duplex, requestId: string, status: 401 | 404 | 503, message: string): void {
  if (socket.destroyed) return;
  const code = status === 401 ? 'invalid_api_key' : status === 404 ? 'not_found' : 'unavailable';
  const body = JSON.stringify({ error: { code, message, requestId, details: [] } });
  const text = { 401: 'Unauthorized', 404: 'Not Found', 503: 'Service Unavailable' }[status];
  const retryAfter = status === 503 ? `Retry-After: ${UPGRADE_RETRY_SECONDS}\r\n` : '';
  socket.end(`HTTP/1.1 ${status} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n${retryAfter}Connection: close\r\n\r\n${body}`, () => socket.destroy());
}

/**
 * The agent gateway: registers `POST /agent/v1/enroll` on
 * `app`, takes WebSocket upgrades on `/agent/v1/ws` authenticated by the machine token (401
 * before the upgrade otherwise; at most `maxPendingUpgrades` being checked at once, more are
 * 503, and each must be accepted, and its link send `hello`, within `agentHandshakeMs`),
 * counts each link in the agents' share of the connection budget, keeps one socket per machine across replicas (the newest
 * replaces an older one with 4409, here or on the replica holding it, through `agent_links`), sends `assign` and `cancel` for the `agent_dispatch` notices of machines
 * connected here, and sweeps machine liveness. Call before `app.listen()`; `app.close()` closes it too.
 *
 * @example
 *   const gateway = await createAgentGateway({ app, deps: execution, lifecycle: executionLifecycle(execution) });
 *   await app.listen({ port: config.port });
 */
export async function createAgentGateway(options: AgentGatewayOptions): Promise<AgentGateway> {
  const { app, deps, lifecycle } = options;
  const log: Logger = deps.log ?? app.log.child({ component: 'agent gateway' });
  const connections = new Map<string, AgentConnection>();
  /** Each link's number from `announceAgentLink`: a notice of a larger one for its machine closes it. */
  const epochs = new WeakMap<AgentConnection, number>();
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES });
  let closing = false;
  // One writer for every link: their heartbeats share statements.
  const writeBeat = heartbeatWriter(deps.db, { maxGapSeconds: 2 * deps.config.heartbeatSeconds });

  await app.register(agentRoutes, { db: deps.db, heartbeatSeconds: deps.config.heartbeatSeconds, allowSimulated: deps.config.allowSimulatedMachines });

  /** Takes an authenticated socket as the machine's link; its `hello` must come before `helloBy` (epoch ms). */
  const accept = (ws: WebSocket, machineId: string, epoch: number, helloBy: number) => {
    if (closing) {
      ws.close(1001, 'server shutting down');
      return;
    }
    const connection = new AgentConnection(ws, machineId, { deps, lifecycle, log, writeBeat, helloBy, ...(options.gpuSamples ? { gpuSamples: options.gpuSamples } : {}) });
    epochs.set(connection, epoch);
    const previous = connections.get(machineId);
    connections.set(machineId, connection);
    if (previous !== connection) previous?.close(4409, REPLACED);
    ws.on('close', () => {
      if (connections.get(machineId) === connection) connections.delete(machineId);
    });
  };

  /** Upgrades whose machine token is being checked: bounded in number and in time, before anyone is known. */
  const pending = new Set<Duplex>();
  const { maxPendingUpgrades, agentHandshakeMs } = deps.config;
  const onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => {});
    const path = new URL(request.url ?? '/', 'http://gateway').pathname;
    if (path !== AGENT_WS_PATH) return refuseUpgrade(socket, app.nextRequestId(), 404, `No WebSocket at ${path}; agents connect to ${AGENT_WS_PATH}.`);
    if (closing) return refuseUpgrade(socket, app.nextRequestId(), 503, 'The server is shutting down.');
    if (pending.size >= maxPendingUpgrades) {
      return refuseUpgrade(socket, app.nextRequestId(), 503, `${maxPendingUpgrades} agent connections are being set up at once, the most this server takes; retry in ${UPGRADE_RETRY_SECONDS} s.`);
    }
    const startedAt = Date.now();
    pending.add(socket);
    const deadline = setTimeout(
      () => refuseUpgrade(socket, app.nextRequestId(), 503, `The machine token could not be checked within ${agentHandshakeMs} ms; retry in ${UPGRADE_RETRY_SECONDS} s.`),
      agentHandshakeMs,
    );
    const settle = () => {
      clearTimeout(deadline);
      pending.delete(socket);
    };
    socket.once('close', settle);
    authenticateMachine(deps.db, request.headers.authorization)
      // A socket closed meanwhile (its client, or the deadline) takes no link over from the machine's others.
      .then(async (machine) => (machine && !socket.destroyed ? { machineId: machine.machineId, epoch: await announceAgentLink(deps.db, machine.machineId) } : null))
      .then(
        (link) => {
          if (socket.destroyed) return settle();
          if (!link) return refuseUpgrade(socket, app.nextRequestId(), 401, 'The machine token is missing, unknown or disabled: send "Authorization: Bearer gfa_…" from enrollment.');
          settle();
          app.connectionBudget.admitAgent(socket);
          wss.handleUpgrade(request, socket, head, (ws) => accept(ws, link.machineId, link.epoch, startedAt + agentHandshakeMs));
        },
        (err: unknown) => {
          log.warn({ err }, 'agent upgrade: the machine token could not be checked or the link not announced');
          refuseUpgrade(socket, app.nextRequestId(), 503, ERROR_CODES.unavailable.message);
        },
      );
  };
  app.server.on('upgrade', onUpgrade);

  const unlisten = await deps.db.listen(AGENT_DISPATCH_CHANNEL, (payload) => {
    const notice = parseNotice(payload);
    if (notice === 'invalid') return log.warn({ channel: AGENT_DISPATCH_CHANNEL }, `agent dispatch: ignored a malformed notice ${payload.slice(0, 200)}`);
    if (notice === null) {
      for (const connection of connections.values()) connection.dispatch(null);
      return;
    }
    connections.get(notice.machineId)?.dispatch(notice);
  });

  const unlistenLinks = await deps.db.listen(AGENT_LINKS_CHANNEL, (payload) => {
    if (payload === '') return;
    let notice: z.infer<typeof linkNoticeSchema>;
    try {
      notice = linkNoticeSchema.parse(JSON.parse(payload));
    } catch {
      return log.warn({ channel: AGENT_LINKS_CHANNEL }, `agent links: ignored a malformed notice ${payload.slice(0, 200)}`);
    }
    const held = connections.get(notice.machineId);
    if (!held || (epochs.get(held) ?? Number.POSITIVE_INFINITY) >= notice.epoch) return;
    connections.delete(notice.machineId);
    held.close(4409, REPLACED);
  });

  const { config } = deps;
  const sweep = async () => {
    const silent = await markSilentMachinesOffline(deps.db, config);
    // Offline with work on it: the machine may still be running that work, cut off from us.
    const partitioned = await machinesWithLiveAssignments(deps.db, silent);
    await recordFleetEvents(
      deps.db,
      partitioned.map((m) => ({
        type: 'machine.partitioned' as const,
        machineId: m.machineId,
        message: `silent for ${config.machineOfflineSeconds} s with ${m.live} live assignment${m.live === 1 ? '' : 's'}; they are requeued after ${config.machineLostGraceSeconds} s more unless it comes back`,
        details: { liveAssignments: m.live },
      })),
    );
    const lost = await assignmentsPastGrace(deps.db, config);
    const unanswered = await unansweredOffers(deps.db, config);
    await runSteps([
      ...lost.map((a) => [`marking assignment ${a.id} lost`, () => lifecycle.assignmentLost(a.id, `the machine was offline for more than ${config.machineLostGraceSeconds} s`)] as const),
      ...unanswered.map(
        (a) =>
          [
            `taking the offer of assignment ${a.id} back`,
            () => lifecycle.assignmentRejected(a.machineId, a.id, 'timeout', `the machine did not accept the assignment within ${config.assignTimeoutSeconds} s`),
          ] as const,
      ),
    ]);
    // Challenges past their time fail (and their agents are told to stop), then those due start.
    const overdue = await overdueChallenges(deps.db);
    await runSteps([
      ...overdue.map(
        (c) =>
          [
            `failing overdue GPU challenge ${c.id}`,
            async () => {
              if ((await finishChallenge(deps.db, c.id, { passed: false, reason: c.reason })).recorded) {
                await notifyAgent(deps.db, { machineId: c.machineId, kind: 'challenge.cancel', challengeId: c.id, reason: c.reason });
              }
            },
          ] as const,
      ),
      ['starting GPU challenges', () => scheduleChallenges({ db: deps.db, config, log, ...(deps.challengePlan ? { challengePlan: deps.challengePlan } : {}) })] as const,
    ]);
  };
  const sweeper = startPeriodic({ name: 'agent gateway liveness sweep', intervalMs: options.sweepIntervalMs ?? config.sweepIntervalMs, run: sweep, log });
  // One timer for all links rather than one each: a link silent for three heartbeat intervals is closed.
  // A tick that comes a whole interval late means this process was stalled (a busy machine, a long
  // GC): the frames agents sent meanwhile wait unread behind this timer, so that silence is ours,
  // not theirs, and the links are judged on the next tick, after those frames were read.
  const heartbeatMs = config.heartbeatSeconds * 1000;
  let lastTick = Date.now();
  const watchdog = setInterval(() => {
    const now = Date.now();
    const late = now - lastTick > 2 * heartbeatMs;
    lastTick = now;
    if (late) return;
    for (const connection of connections.values()) connection.closeIfSilent(now, 3 * heartbeatMs);
  }, heartbeatMs);
  watchdog.unref();

  let closed: Promise<void> | null = null;
  const close = () => {
    closed ??= (async () => {
      closing = true;
      app.server.off('upgrade', onUpgrade);
      for (const socket of pending) socket.destroy();
      await unlisten().catch(() => {});
      await unlistenLinks().catch(() => {});
      await sweeper.close();
      clearInterval(watchdog);
      const sockets = [...connections.values()];
      for (const connection of sockets) connection.close(1001, 'server shutting down');
      await Promise.all(sockets.map((c) => c.idle()));
      for (const ws of wss.clients) ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    })();
    return closed;
  };
  app.addHook('preClose', close);

  return {
    close,
    connectedMachines: () => connections.size,
    sweep,
  };
}

import { performance } from 'node:perf_hooks';
import { setImmediate as yieldToLoop } from 'node:timers/promises';
import { challengeLateness, type ChallengeCommitMessage, type ChallengeOpeningsMessage, type ChallengePlan } from '@gpufarm/shared';
import { checkOpening, prepareCheck } from '@gpufarm/shared/node';
import type { ExecutionConfig } from '../config.js';
import type { Database } from '../db/database.js';
import { CHALLENGE_RETRY_SECONDS, machinesDueForChallenge, startChallenge, type ChallengeRow } from './challenge-store.js';
import type { Logger } from '../logger.js';

/**
 * When and how the control plane judges a GPU challenge (docs/decisions.md, "GPU proof"). A
 * challenge goes out at the agent's hello (a failed verification is tried again then) and from
 * the gateway's sweep (machines left unverified, failed ones after `CHALLENGE_RETRY_SECONDS`,
 * verified ones at their random idle re-check). The link (agent-gateway/link.ts) carries it.
 */

export interface ChallengeDeps {
  db: Database;
  config: Pick<ExecutionConfig, 'allowSimulatedMachines'>;
  /** Where a machine that cannot be challenged is logged (with `machineId`); default nowhere. */
  log?: Logger;
  /** Replaces every class's plan (tests that play a machine of a real class on the CPU). */
  challengePlan?: ChallengePlan;
}

/** Starts the challenges that are due: of `machineId` only when given (a hello), else of every machine (the sweep). Returns their ids. */
export async function scheduleChallenges(deps: ChallengeDeps, params: { machineId?: string } = {}): Promise<string[]> {
  const retryFailedAfterSeconds = params.machineId === undefined ? CHALLENGE_RETRY_SECONDS : 0;
  const allowSimulated = deps.config.allowSimulatedMachines;
  const due = await machinesDueForChallenge(deps.db, { retryFailedAfterSeconds, allowSimulated, ...(params.machineId === undefined ? {} : { machineId: params.machineId }) });
  const started: string[] = [];
  for (const machineId of due) {
    const start = await startChallenge(deps.db, { machineId, retryFailedAfterSeconds, allowSimulated, ...(deps.challengePlan ? { plan: deps.challengePlan } : {}) });
    if (start.started) started.push(start.challengeId);
    else if (start.reason !== null) deps.log?.info({ machineId, reason: start.reason }, `machine ${machineId} cannot prove its GPUs: ${start.reason}`);
  }
  return started;
}

/**
 * The commitment's verdict before any row is opened (pure): every GPU of the challenge, once,
 * with one root per round; in time for the class; and not a commitment the machine sent before
 * (a replay: a fresh go seed makes every root new). Null when it may be opened, else why not.
 */
export function judgeCommit(
  challenge: Pick<ChallengeRow, 'gpus' | 'rounds' | 'expectedSeconds' | 'deadlineSeconds'>,
  commit: ChallengeCommitMessage,
  elapsedSeconds: number,
  earlier: Array<{ id: string; roots: Record<string, string> }>,
): string | null {
  const asked = new Set(challenge.gpus.map((g) => g.uuid));
  const sent = new Set<string>();
  for (const g of commit.gpus) {
    if (!asked.has(g.uuid)) return `the commitment names ${g.uuid}, which is not a GPU of this challenge`;
    if (sent.has(g.uuid)) return `the commitment names ${g.uuid} twice`;
    sent.add(g.uuid);
    const rounds = g.roots.length / 64;
    if (rounds !== challenge.rounds) return `${g.uuid}: the commitment holds ${rounds} roots, not one for each of the ${challenge.rounds} rounds`;
    if (challenge.deadlineSeconds !== null && g.gpuSeconds > elapsedSeconds) {
      return `${g.uuid}: the machine reports ${g.gpuSeconds.toFixed(2)} s of GPU time, more than the ${elapsedSeconds.toFixed(2)} s between the go and the commitment`;
    }
  }
  const missing = challenge.gpus.filter((g) => !sent.has(g.uuid));
  if (missing.length > 0) return `the commitment leaves out ${missing.map((g) => g.uuid).join(', ')}`;
  const late = challengeLateness(challenge, elapsedSeconds);
  if (late !== null) return late;
  for (const e of earlier) {
    for (const g of commit.gpus) {
      const before = e.roots[g.uuid];
      if (before !== undefined && before.slice(0, 64) === g.roots.slice(0, 64)) {
        return `${g.uuid}: the commitment repeats challenge ${e.id}'s roots: a replayed commitment, not work on this challenge's seed`;
      }
    }
  }
  return null;
}

const hashes = (hex: string): Buffer[] => Array.from({ length: hex.length / 64 }, (_, i) => Buffer.from(hex.slice(i * 64, i * 64 + 64), 'hex'));

/**
 * The server's check of the opened rows: exactly the rows asked, in order, each product row
 * recomputed here and led by its path to the committed root. It yields to the event loop
 * between rows (each is k · n multiply-adds), so agents' links are served meanwhile. Returns
 * null when every row holds, else the first reason one does not, and the CPU time it took.
 */
export async function checkChallengeOpenings(
  challenge: Pick<ChallengeRow, 'gpus' | 'm' | 'n' | 'k' | 'preSeed' | 'goSeed' | 'roots' | 'opened'>,
  message: ChallengeOpeningsMessage,
): Promise<{ reason: string | null; checkMs: number }> {
  const opened = challenge.opened ?? [];
  let checkMs = 0;
  const timed = <T>(fn: () => T): T => {
    const started = performance.now();
    try {
      return fn();
    } finally {
      checkMs += performance.now() - started;
    }
  };
  if (message.openings.length !== opened.length) return { reason: `the machine sent ${message.openings.length} opened rows, not the ${opened.length} asked`, checkMs };
  for (const [i, o] of message.openings.entries()) {
    const want = opened[i]!;
    if (o.uuid !== want.uuid || o.round !== want.round || o.row !== want.row) {
      return { reason: `opened row ${i} is ${o.uuid} round ${o.round} row ${o.row}, not ${want.uuid} round ${want.round} row ${want.row} as asked`, checkMs };
    }
  }
  const goSeed = Buffer.from(challenge.goSeed ?? '', 'hex');
  const preSeed = Buffer.from(challenge.preSeed, 'hex');
  for (const gpu of challenge.gpus) {
    const roots = hashes(challenge.roots?.[gpu.uuid] ?? '');
    const mine = message.openings.filter((o) => o.uuid === gpu.uuid);
    if (mine.length === 0) continue;
    const check = timed(() => prepareCheck({ preSeed, goSeed, gpu: gpu.uuid, m: challenge.m, n: challenge.n, k: challenge.k, roots }));
    for (const o of mine) {
      await yieldToLoop();
      const reason = timed(() => checkOpening(check, { round: o.round, row: o.row, path: hashes(o.path) }));
      if (reason !== null) return { reason, checkMs };
    }
  }
  return { reason: null, checkMs };
}

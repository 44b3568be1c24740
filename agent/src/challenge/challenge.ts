import {
  GpufarmError,
  type ChallengeCommitMessage,
  type ChallengeOpenMessage,
  type ChallengeOpeningsMessage,
  type ChallengePrepareMessage,
} from '@gpufarm/shared';

/**
 * The GPU challenge as the daemon runs it (docs/decisions.md, "GPU proof"): one port, two
 * implementations. On real GPUs gpu-bench runs it in a container holding exactly the
 * challenge's GPUs (`container-challenge.ts`, driven by `gpu-bench-session.ts`); on a simulated
 * machine the same chain runs on the CPU (`cpu-challenge.ts`). Values are as the protocol
 * carries them (hex), so the daemon forwards them unchanged.
 */

/** What `challenge.prepare` asks for. */
export type ChallengeSpec = Omit<ChallengePrepareMessage, 'type'>;
/** One GPU's committed chain: every round's root (hex, concatenated) and the time it took. */
export type ChallengeCommitment = ChallengeCommitMessage['gpus'][number];
/** A row the server opens. */
export type ChallengeRow = ChallengeOpenMessage['rows'][number];
/** An opened row's Merkle path (hex, leaf's sibling first). */
export type ChallengeOpening = ChallengeOpeningsMessage['openings'][number];

/**
 * One challenge on this machine, called in the protocol's order: `prepare`, `go`, `open`.
 * Any step rejects with a `ChallengeError` saying why the machine cannot go on.
 */
export interface GpuChallenge {
  /** Sets up everything before the timed part (container, driver, B); resolves once ready for `go`. */
  prepare(): Promise<void>;
  /** Runs every GPU's chain from the go seed (64 hex digits); resolves with each GPU's commitment. */
  go(seed: string): Promise<ChallengeCommitment[]>;
  /** Each row's Merkle path, in the order asked; the challenge's GPUs are free once it resolves. */
  open(rows: readonly ChallengeRow[]): Promise<ChallengeOpening[]>;
  /** Stops it wherever it is and frees the GPUs; a step in progress rejects. Safe to call again, and after `open`. */
  cancel(): Promise<void>;
}

/** Starts a challenge (the daemon's port): one per `challenge.prepare`, nothing runs before `prepare()`. */
export type ChallengeStarter = (spec: ChallengeSpec) => GpuChallenge;

export type ChallengeErrorCode = 'challenge_failed' | 'challenge_cancelled';

/**
 * Why a challenge cannot go on. `challenge_failed`: the program or the work failed (the message
 * goes to the control plane in `challenge.failed`); `challenge_cancelled`: it was stopped here.
 */
export class ChallengeError extends GpufarmError<ChallengeErrorCode> {
  constructor(code: ChallengeErrorCode, message: string, options: { cause?: unknown } = {}) {
    super(code, message, options);
  }
}

/** The error a step in progress rejects with once `cancel()` was called. */
export function challengeCancelled(): ChallengeError {
  return new ChallengeError('challenge_cancelled', 'the challenge was cancelled');
}

/** A challenge this machine cannot run: `prepare()` rejects with `reason`, nothing starts. */
export function refusedChallenge(reason: string): GpuChallenge {
  const refused = async (): Promise<never> => {
    throw new ChallengeError('challenge_failed', reason);
  };
  return { prepare: refused, go: refused, open: refused, cancel: async () => undefined };
}

/**
 * The rows of `rows` that a challenge of `spec` cannot open (a GPU not in it, a round or row past
 * its end), as a sentence; null when every row is one of the challenge's.
 */
export function unknownRows(spec: Pick<ChallengeSpec, 'gpus' | 'rounds' | 'm'>, rows: readonly ChallengeRow[]): string | null {
  const uuids = new Set(spec.gpus.map((g) => g.uuid));
  const bad = rows.filter((r) => !uuids.has(r.uuid) || r.round >= spec.rounds || r.row >= spec.m);
  if (bad.length === 0) return null;
  const shown = bad.slice(0, 3).map((r) => `${r.uuid} round ${r.round} row ${r.row}`).join(', ');
  return `cannot open ${shown}${bad.length > 3 ? ` and ${bad.length - 3} more` : ''}: the challenge has ${spec.rounds} rounds of ${spec.m} rows on ${spec.gpus.map((g) => g.uuid).join(', ')}`;
}

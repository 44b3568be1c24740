import { fillInt8, int8Matrix, leafHash, merkleLevels, merklePath, nextRoundSeed, productRow, seedFor } from '@gpufarm/shared/node';
import { ChallengeError, challengeCancelled, refusedChallenge, unknownRows, type ChallengeSpec, type ChallengeStarter, type GpuChallenge } from './challenge.js';

/**
 * The GPU challenge of a simulated machine: the same chain (`shared/src/proof/gpu-challenge.ts`)
 * computed on the CPU, on the daemon's own thread in slices of at most `sliceMs`, so the link,
 * heartbeats and log shipping go on meanwhile. Opening a row recomputes its round from its seed,
 * as gpu-bench does, so no round's tree is kept. A GPU's `gpuSeconds` is the time its slices
 * took on this thread.
 */

/** More multiply-adds than this in one challenge (every GPU, every round) are refused: a simulated challenge is small. */
export const CPU_CHALLENGE_MAX_MULTIPLY_ADDS = 2 ** 32;
/** Longest a slice holds the event loop, by default. */
export const CPU_CHALLENGE_SLICE_MS = 10;

/** One GPU's chain as far as it went: each round's seed and root, and the time spent. */
interface Chain {
  uuid: string;
  bt: Int8Array;
  seeds: Buffer[];
  roots: Buffer[];
  seconds: number;
}

/**
 * Starts a simulated challenge (`ChallengeStarter`). `prepare()` refuses shapes beyond
 * `CPU_CHALLENGE_MAX_MULTIPLY_ADDS` and makes each GPU's B.
 */
export function cpuChallenge(spec: ChallengeSpec, options: { sliceMs?: number } = {}): GpuChallenge {
  const sliceMs = options.sliceMs ?? CPU_CHALLENGE_SLICE_MS;
  let chains: Chain[] | null = null;
  let cancelled = false;
  let sliceStart = performance.now();

  /** Yields to the event loop once the current slice is over; counts the slice's time to `chain`. */
  const breathe = async (chain: Chain | null): Promise<void> => {
    if (cancelled) throw challengeCancelled();
    const now = performance.now();
    if (now - sliceStart < sliceMs) return;
    if (chain) chain.seconds += (now - sliceStart) / 1000;
    await new Promise((resolve) => setImmediate(resolve));
    if (cancelled) throw challengeCancelled();
    sliceStart = performance.now();
  };

  /** One round's Merkle levels, its rows computed a slice at a time; `timed`: its slices count to the chain's time. */
  const solveRound = async (chain: Chain, seed: Buffer, timed: boolean): Promise<Buffer[][]> => {
    const aRow = new Int8Array(spec.k);
    const leaves: Buffer[] = [];
    for (let i = 0; i < spec.m; i++) {
      fillInt8(seed, i * spec.k, spec.k, aRow);
      leaves.push(leafHash(i, productRow(aRow, chain.bt, spec.n, spec.k)));
      await breathe(timed ? chain : null);
    }
    return merkleLevels(leaves);
  };

  return {
    async prepare() {
      const work = spec.m * spec.n * spec.k * spec.rounds * spec.gpus.length;
      if (work > CPU_CHALLENGE_MAX_MULTIPLY_ADDS) {
        throw new ChallengeError('challenge_failed', `a simulated challenge runs on the CPU and this one is ${work.toExponential(2)} multiply-adds, more than the ${CPU_CHALLENGE_MAX_MULTIPLY_ADDS.toExponential(2)} it takes`);
      }
      const made: Chain[] = [];
      sliceStart = performance.now();
      for (const gpu of spec.gpus) {
        made.push({ uuid: gpu.uuid, bt: int8Matrix(seedFor('b', Buffer.from(spec.preSeed, 'hex'), gpu.uuid), spec.n, spec.k), seeds: [], roots: [], seconds: 0 });
        await breathe(null);
      }
      chains = made;
    },

    async go(seed) {
      if (!chains) throw new ChallengeError('challenge_failed', 'go before the challenge was prepared');
      const goSeed = Buffer.from(seed, 'hex');
      for (const chain of chains) {
        sliceStart = performance.now();
        let roundSeed = seedFor('gpu', goSeed, chain.uuid);
        for (let r = 0; r < spec.rounds; r++) {
          const levels = await solveRound(chain, roundSeed, true);
          const root = levels[levels.length - 1]![0]!;
          chain.seeds.push(roundSeed);
          chain.roots.push(root);
          roundSeed = nextRoundSeed(roundSeed, root);
        }
        chain.seconds += (performance.now() - sliceStart) / 1000;
      }
      return chains.map((c) => ({ uuid: c.uuid, roots: Buffer.concat(c.roots).toString('hex'), gpuSeconds: c.seconds }));
    },

    async open(rows) {
      if (!chains || chains.some((c) => c.roots.length !== spec.rounds)) throw new ChallengeError('challenge_failed', 'open before the chain was committed');
      const unknown = unknownRows(spec, rows);
      if (unknown) throw new ChallengeError('challenge_failed', unknown);
      // Each asked round is recomputed once, in the order first asked.
      const trees = new Map<string, Buffer[][]>();
      const openings = [];
      for (const row of rows) {
        const chain = chains.find((c) => c.uuid === row.uuid)!;
        const key = `${row.uuid}\0${row.round}`;
        let levels = trees.get(key);
        if (!levels) {
          sliceStart = performance.now();
          levels = await solveRound(chain, chain.seeds[row.round]!, false);
          if (!levels[levels.length - 1]![0]!.equals(chain.roots[row.round]!)) {
            throw new ChallengeError('challenge_failed', `${row.uuid} round ${row.round} came out differently the second time: this CPU computes the chain unreliably`);
          }
          trees.set(key, levels);
        }
        openings.push({ uuid: row.uuid, round: row.round, row: row.row, path: Buffer.concat(merklePath(levels, row.row)).toString('hex') });
      }
      return openings;
    },

    async cancel() {
      cancelled = true;
    },
  };
}

/**
 * The daemon's starter when none is wired (daemons that only run the link): simulated
 * challenges on the CPU; real GPUs are refused, since no GPU program runs here.
 */
export const simulatedChallenges: ChallengeStarter = (spec) =>
  spec.simulated ? cpuChallenge(spec) : refusedChallenge('this daemon has no container runtime to run the GPU program in: it proves simulated GPUs only');

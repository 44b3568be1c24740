import { randomBytes } from 'node:crypto';
import { challengePlan, findGpuClass, pickOpenings } from '@gpufarm/shared';
import {
  chainSeeds,
  checkOpenings,
  fillInt8,
  int8Matrix,
  leafHash,
  nextRoundSeed,
  productRow,
  rootFromPath,
  seedFor,
  solveChain,
  type RowOpening,
} from '@gpufarm/shared/node';
import type { StandaloneSection } from './standalone.js';

/** Seconds of one core the server may spend checking one GPU's challenge. */
const TARGET_SECONDS_PER_GPU = 1;
const UUID = 'GPU-00000000-0000-0000-0000-000000000000';
const s = (x: number) => x.toFixed(3);

/**
 * A commitment that `openings` pass: the roots of unopened rounds are random, and each opened
 * round's root is the one its row and a random path lead to (the rounds in order, since each
 * seed comes from the roots before it). The work is what the check itself does per row.
 */
function passingCommitment(plan: { m: number; n: number; k: number; rounds: number }, preSeed: Buffer, goSeed: Buffer, rows: Array<{ round: number; row: number }>) {
  const roots: Buffer[] = Array.from({ length: plan.rounds }, () => randomBytes(32));
  const bt = int8Matrix(seedFor('b', preSeed, UUID), plan.n, plan.k);
  const depth = Math.log2(plan.m);
  const byRound = new Map(rows.map((r) => [r.round, r.row]));
  const openings: RowOpening[] = [];
  let seed = seedFor('gpu', goSeed, UUID);
  for (let round = 0; round < plan.rounds; round++) {
    const row = byRound.get(round);
    if (row !== undefined) {
      const aRow = new Int8Array(plan.k);
      fillInt8(seed, row * plan.k, plan.k, aRow);
      const path = Array.from({ length: depth }, () => randomBytes(32));
      roots[round] = rootFromPath(leafHash(row, productRow(aRow, bt, plan.n, plan.k)), row, path);
      openings.push({ round, row, path });
    }
    seed = nextRoundSeed(seed, roots[round]!);
  }
  return { roots, openings };
}

/**
 * The server's CPU per challenge: checking one GPU's openings of an H100's plan (16 rows of
 * n · k multiply-adds, B made once, every seed derived from the roots) beside its baseline, the
 * same multiply-adds of the same rows alone; and a simulated GPU's whole challenge on the CPU
 * (what `npm start`'s agent runs; labelled simulated: no GPU figure).
 */
export const gpuChallengeSection: StandaloneSection = {
  name: 'gpu challenge',
  run: async (log) => {
    const plan = challengePlan(findGpuClass('h100-80gb-sxm')!);
    const preSeed = randomBytes(32);
    const goSeed = randomBytes(32);
    // Distinct rounds, so every opening counts (pickOpenings may repeat one).
    const rows = pickOpenings(plan, (max) => Math.floor(Math.random() * max)).map((o, i) => ({ round: Math.floor((i * plan.rounds) / plan.checks), row: o.row }));
    const { roots, openings } = passingCommitment(plan, preSeed, goSeed, rows);

    const checkStarted = performance.now();
    const verdict = checkOpenings({ preSeed, goSeed, gpu: UUID, roots, openings, ...plan });
    const check = (performance.now() - checkStarted) / 1000;
    if (verdict !== null) throw new Error(`the bench's commitment did not pass: ${verdict}`);

    const seeds = chainSeeds(goSeed, UUID, roots);
    const bt = int8Matrix(seedFor('b', preSeed, UUID), plan.n, plan.k);
    const baselineStarted = performance.now();
    for (const o of openings) {
      const aRow = new Int8Array(plan.k);
      fillInt8(seeds[o.round]!, o.row * plan.k, plan.k, aRow);
      productRow(aRow, bt, plan.n, plan.k);
    }
    const baseline = (performance.now() - baselineStarted) / 1000;

    const sim = challengePlan('simulated');
    const simStarted = performance.now();
    solveChain({ preSeed, goSeed, gpu: UUID, ...sim });
    const simulated = (performance.now() - simStarted) / 1000;
    log(`H100 SXM plan: m ${plan.m}, n ${plan.n}, k ${plan.k}, ${plan.rounds} rounds, ${plan.checks} rows checked`);

    const row = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(58) : c.padStart(10))).join('  ');
    const met = check <= TARGET_SECONDS_PER_GPU;
    return {
      table: [
        row(['measure', 'seconds', 'baseline', 'ratio', 'target', 'result']),
        row(['check of one GPU (H100 SXM plan), s of one core (baseline: its rows\' multiply-adds)', s(check), s(baseline), (check / baseline).toFixed(2), `<= ${TARGET_SECONDS_PER_GPU} s`, met ? 'PASS' : 'FAIL']),
        row([`simulated GPU, whole challenge on the CPU (${sim.rounds} rounds of ${sim.m}x${sim.n}x${sim.k}; simulated, no GPU)`, s(simulated), '', '', '', '']),
      ],
      missed: met ? [] : [`the check of one GPU took ${s(check)} s (target <= ${TARGET_SECONDS_PER_GPU} s)`],
    };
  },
};

import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import t from 'tap';
import { findGpuClass } from '../src/catalog/gpu-classes.js';
import { challengeLateness, challengePlan, pickOpenings } from '../src/proof/challenge-plan.js';
import {
  assertChallengeShape,
  chainSeeds,
  checkOpenings,
  int8Matrix,
  leafHash,
  merkleLevels,
  merklePath,
  passProbability,
  productRow,
  rootFromPath,
  seedFor,
  solveChain,
  solveRound,
  type RowOpening,
} from '../src/proof/gpu-challenge.js';

/**
 * The GPU challenge's exact work (shared/src/proof/gpu-challenge.ts): pinned to known vectors,
 * held equal to its C twin (agent/gpu-bench/src/challenge.h, compiled here with gcc and run on
 * the CPU), and the server's check of opened rows against honest and dishonest machines.
 */

const run = promisify(execFile);
const PRE = Buffer.alloc(32, 0x11);
const GO = Buffer.alloc(32, 0x22);
const SHAPE = { m: 256, n: 256, k: 256 };
/** The UUID of the fake driver's GPU 0 (agent/test/fixtures/fake-libcuda.c): gpu-bench's tests reuse these vectors. */
const GPU = 'GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf';

/** Known vectors: GPU of pre-seed 0x11…, go seed 0x22…, m = n = k = 256, three rounds. */
const KNOWN = {
  a0: '77d2dc63ab6aaeabd4aeb05b8efa9844',
  leaf0: '581a110e3973d6570f17f737db10704bf98ad8d045f2dd1d3a2fc86ba66d08aa',
  row0: [-42863, -37449, 3727, 35294],
  roots: [
    'c7d27de36a3e4562dd5e413889ada303657243a6e595b3dd1b83f29bd6f6906a',
    'b6df4a2c39f75aca4e3da98af8bfdefc609fd9cfea6a42cd0b9209f97cbb5c19',
    '0438a59b9907dbc451b0931b3bcffbba427ab6ccada70b1e3e40a6c312453c27',
  ],
};

const chain = solveChain({ preSeed: PRE, goSeed: GO, gpu: GPU, rounds: 3, ...SHAPE });
const bt = int8Matrix(seedFor('b', PRE, GPU), SHAPE.n, SHAPE.k);

t.test('default: the generator, a row, its leaf and each round\'s root match the known vectors', async (t) => {
  const a = int8Matrix(seedFor('gpu', GO, GPU), SHAPE.m, SHAPE.k);
  t.equal(Buffer.from(a.buffer, 0, 16).toString('hex'), KNOWN.a0);
  const round0 = solveRound(seedFor('gpu', GO, GPU), bt, SHAPE);
  t.same(Array.from(round0.rows[0]!.slice(0, 4)), KNOWN.row0);
  t.equal(round0.levels[0]![0]!.toString('hex'), KNOWN.leaf0);
  t.same(chain.roots.map((r) => r.toString('hex')), KNOWN.roots);
  t.same(chainSeeds(GO, GPU, chain.roots).map((s) => s.toString('hex')), chain.seeds.map((s) => s.toString('hex')), 'the server derives the same seeds from the roots');
});

t.test('behavior: the C definitions that gpu-bench runs give the same vectors, for other shapes and GPUs too', async (t) => {
  const work = mkdtempSync(join(tmpdir(), 'gpu-challenge-'));
  t.teardown(() => rmSync(work, { recursive: true, force: true }));
  const source = fileURLToPath(new URL('../../agent/test/fixtures/challenge-vectors.c', import.meta.url));
  const include = fileURLToPath(new URL('../../agent/gpu-bench/src', import.meta.url));
  const bin = join(work, 'challenge-vectors');
  await run('gcc', ['-O2', '-Wall', '-Wextra', '-Werror', '-I', include, '-o', bin, source]);
  const vectors = async (pre: Buffer, go: Buffer, gpu: string, m: number, n: number, k: number, rounds: number) =>
    (await run(bin, [pre.toString('hex'), go.toString('hex'), gpu, String(m), String(n), String(k), String(rounds)])).stdout.trim().split('\n');

  const known = await vectors(PRE, GO, GPU, 256, 256, 256, 3);
  t.same(known, [
    'sha256(abc) ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad',
    `a0 ${KNOWN.a0}`,
    `leaf0 ${KNOWN.leaf0}`,
    `row0 ${KNOWN.row0.join(' ')}`,
    ...KNOWN.roots.map((r, i) => `root ${i} ${r}`),
  ]);

  const pre = Buffer.from('9f'.repeat(32), 'hex');
  const go = Buffer.from('0123456789abcdef'.repeat(4), 'hex');
  const uuid = 'GPU-b0b1b2b3-b4b5-b6b7-b8b9-babbbcbdbebf';
  const other = solveChain({ preSeed: pre, goSeed: go, gpu: uuid, m: 1024, n: 512, k: 256, rounds: 2 });
  const c = await vectors(pre, go, uuid, 1024, 512, 256, 2);
  t.same(c.filter((l) => l.startsWith('root ')), other.roots.map((r, i) => `root ${i} ${r.toString('hex')}`), 'm = 1024, n = 512, k = 256, another GPU');
});

/** Openings of `rows` rows of `round` from an honest computation of that round. */
function honestOpenings(round: number, rows: number[]): RowOpening[] {
  const { levels } = solveRound(chain.seeds[round]!, bt, SHAPE);
  return rows.map((row) => ({ round, row, path: merklePath(levels, row) }));
}

const check = (openings: RowOpening[], roots: Uint8Array[] = chain.roots, goSeed: Uint8Array = GO) =>
  checkOpenings({ preSeed: PRE, goSeed, gpu: GPU, roots, openings, ...SHAPE });

const NOT_COMPUTED = /the product's row and the Merkle path sent do not lead to the committed root \(the row was not computed, or the path is wrong\)$/;

t.test('behavior: honest openings pass; a wrong path, another row\'s path, another round\'s root or another challenge\'s chain fail with the reason', async (t) => {
  const honest = [...honestOpenings(0, [0, 255]), ...honestOpenings(2, [17])];
  t.equal(check(honest), null);

  const wrongPath = honestOpenings(1, [5]);
  wrongPath[0]!.path[3] = Buffer.alloc(32);
  t.match(check(wrongPath), /^GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf round 1 row 5: the product's row/);
  t.match(check(wrongPath), NOT_COMPUTED);

  t.match(check([{ ...honestOpenings(1, [6])[0]!, row: 5 }]), NOT_COMPUTED, 'the path of another row');

  const swapped = [chain.roots[1]!, chain.roots[0]!, chain.roots[2]!];
  t.match(check(honestOpenings(2, [3]), swapped), NOT_COMPUTED, 'roots out of order change every later seed');

  // A replayed commitment: the roots of this chain sent for a challenge with another go seed.
  t.match(check(honestOpenings(0, [9]), chain.roots, Buffer.alloc(32, 0x33)), NOT_COMPUTED);

  t.match(check([{ ...honestOpenings(0, [1])[0]!, round: 3 }]), /no such round \(the chain has 3\)/);
  t.match(check([{ ...honestOpenings(0, [1])[0]!, row: 256 }]), /no such row \(C has 256\)/);
  t.match(check([{ ...honestOpenings(0, [1])[0]!, path: [] }]), /the Merkle path has 0 hashes, not 8/);
});

t.test('behavior: a machine that computed half of a round passes only the rows it computed', async (t) => {
  const { rows } = solveRound(chain.seeds[1]!, bt, SHAPE);
  // Rows it skipped are zeros: their leaves are hashes of zeros, and the root commits to them.
  const partial = rows.map((row, i) => (i % 2 === 0 ? row : new Int32Array(SHAPE.n)));
  const levels = merkleLevels(partial.map((row, i) => leafHash(i, row)));
  const roots = [chain.roots[0]!, levels[levels.length - 1]![0]!];
  const open = (row: number) => [{ round: 1, row, path: merklePath(levels, row) }];
  t.equal(check(open(4), roots), null, 'a computed row passes');
  t.match(check(open(5), roots), NOT_COMPUTED, 'a skipped row fails');
});

t.test('behavior: Merkle paths lead from any leaf to the root; shapes outside the protocol are refused', async (t) => {
  const leaves = Array.from({ length: 8 }, (_, i) => leafHash(i, Int32Array.from({ length: 256 }, (_, j) => i * j)));
  const levels = merkleLevels(leaves);
  for (let i = 0; i < 8; i++) t.ok(rootFromPath(leaves[i]!, i, merklePath(levels, i)).equals(levels[3]![0]!), `leaf ${i}`);
  t.throws(() => merkleLevels(leaves.slice(0, 6)), /power of two/);
  t.throws(() => assertChallengeShape({ m: 256, n: 384, k: 256 }), /n must be a power of two from 256 to 16384, not 384/);
  t.throws(() => assertChallengeShape({ m: 256, n: 256, k: 32768 }), /k must be a power of two/);
  t.throws(() => assertChallengeShape({ m: 128, n: 256, k: 256 }), /m must be a power of two from 256 to 1048576, not 128/);
  t.same(Array.from(productRow(Int8Array.from([1, -2, 3, 4]), Int8Array.from([1, 1, 1, 1, -128, 127, 0, 2]), 2, 4)), [6, -374]);
});

t.test('behavior: the chance a machine that did a fraction of the work passes', async (t) => {
  t.equal(passProbability(1, 32), 1);
  t.equal(passProbability(0.5, 32), 2 ** -32);
  t.ok(passProbability(2 / 3, 32) < 3e-6, 'two thirds of the work (a 1.5x faster claim): below 3 in a million');
  t.ok(passProbability(0.9, 32) > 0.03 && passProbability(0.9, 32) < 0.04, '90% of the work passes about 3.4% of the time');
});

t.test('behavior: each class gets seconds of work at its expected int8 rate, and a GPU at half that rate is late', async (t) => {
  for (const id of ['t4-16gb', 'rtx-3060-12gb', 'rtx-4090-24gb', 'h100-80gb-sxm', 'b200-180gb']) {
    const cls = findGpuClass(id)!;
    const plan = challengePlan(cls);
    t.ok(plan.expectedSeconds! >= 5 && plan.expectedSeconds! < 5.1, `${id}: ${plan.expectedSeconds} s of work`);
    t.ok(plan.m >= 4096 && plan.m <= 262144 && (plan.m & (plan.m - 1)) === 0, `${id}: m = ${plan.m}, a power of two`);
    t.ok(plan.m * plan.n * 4 <= cls.vramBytes / 4, `${id}: C takes at most a quarter of the GPU's memory`);
    t.equal(challengeLateness(plan, plan.expectedSeconds! / 0.65), null, `${id}: at 0.65 of the expected rate, in time`);
    t.match(challengeLateness(plan, plan.expectedSeconds! / 0.5), /past the [\d.]+ s this class allows .* the GPU is slower than the class it claims/, `${id}: at half the rate, late`);
  }
  const h100 = challengePlan(findGpuClass('h100-80gb-sxm')!);
  const a100 = challengePlan(findGpuClass('a100-80gb')!);
  t.ok((h100.rounds * h100.m) / (findGpuClass('a100-80gb')!.expectedMatmulGflops * 2e9 / 2 / 4096 / 4096) > h100.deadlineSeconds!, 'an A100 doing an H100\'s challenge misses its deadline');
  t.ok(a100.m < h100.m, 'a slower class gets a smaller round');
  const sim = challengePlan('simulated');
  t.same(sim, { m: 256, n: 256, k: 256, rounds: 4, checks: 16, expectedSeconds: null, deadlineSeconds: null });
  t.equal(challengeLateness(sim, 1e6), null, 'a simulated GPU has no deadline');
  let draws = 0;
  const picks = pickOpenings(h100, (max) => (draws++ % 2 === 0 ? max - 1 : 0));
  t.equal(picks.length, 16);
  t.same(picks[0], { round: h100.rounds - 1, row: 0 });
});

import { pickOpenings, SIMULATED_CHALLENGE } from '@gpufarm/shared';
import { checkOpenings, solveChain } from '@gpufarm/shared/node';
import t from 'tap';
import type { ChallengeCommitment, ChallengeOpening, ChallengeSpec } from '../src/challenge/challenge.js';
import { cpuChallenge, simulatedChallenges } from '../src/challenge/cpu-challenge.js';

/**
 * The simulated machine's GPU challenge: the chain on the CPU in slices, held to shared's
 * definitions (`solveChain`) and the server's check (`checkOpenings`).
 */

const PRE = 'a1'.repeat(32);
const GO = 'b2'.repeat(32);
const GPUS = [{ index: 0, uuid: 'GPU-sim-l4-24gb-0' }, { index: 1, uuid: 'GPU-sim-l4-24gb-1' }];
const spec = (over: Partial<ChallengeSpec> = {}): ChallengeSpec => ({ challengeId: 'chl_cpu', gpus: GPUS, ...SIMULATED_CHALLENGE, preSeed: PRE, simulated: true, ...over });

const hashes = (hex: string) => Array.from({ length: hex.length / 64 }, (_, i) => Buffer.from(hex.slice(i * 64, i * 64 + 64), 'hex'));
const serverCheck = (s: ChallengeSpec, commit: ChallengeCommitment[], openings: ChallengeOpening[], uuid: string) =>
  checkOpenings({
    preSeed: Buffer.from(s.preSeed, 'hex'), goSeed: Buffer.from(GO, 'hex'), gpu: uuid, m: s.m, n: s.n, k: s.k,
    roots: hashes(commit.find((c) => c.uuid === uuid)!.roots),
    openings: openings.filter((o) => o.uuid === uuid).map((o) => ({ round: o.round, row: o.row, path: hashes(o.path) })),
  });

t.test('default: the simulated size\'s commitment is shared\'s chain, and its openings pass the server\'s check', async (t) => {
  const s = spec();
  const challenge = cpuChallenge(s);
  await challenge.prepare();
  // The event loop runs meanwhile: the chain is computed in slices.
  let ticks = 0;
  const ticker = setInterval(() => ticks++, 1);
  const commit = await challenge.go(GO);
  clearInterval(ticker);
  t.ok(ticks >= 2, `timers ran while the chain was computed (${ticks} ticks)`);
  t.same(commit.map((c) => c.uuid), GPUS.map((g) => g.uuid), 'one commitment per GPU, in order');
  for (const c of commit) {
    const expected = solveChain({ preSeed: Buffer.from(PRE, 'hex'), goSeed: Buffer.from(GO, 'hex'), gpu: c.uuid, ...SIMULATED_CHALLENGE });
    t.equal(c.roots, Buffer.concat(expected.roots).toString('hex'), `${c.uuid}: the roots are shared's`);
    t.ok(c.gpuSeconds > 0 && c.gpuSeconds < 60, `${c.uuid}: the CPU time it took (${c.gpuSeconds.toFixed(3)} s)`);
  }
  const rows = GPUS.flatMap((g) => pickOpenings({ ...SIMULATED_CHALLENGE, checks: 16 }, (max) => Math.floor(Math.random() * max)).map((o) => ({ uuid: g.uuid, ...o })));
  const openings = await challenge.open(rows);
  t.same(openings.map((o) => [o.uuid, o.round, o.row]), rows.map((r) => [r.uuid, r.round, r.row]), 'in the order asked');
  for (const g of GPUS) t.equal(serverCheck(s, commit, openings, g.uuid), null, `${g.uuid}: the server's check passes`);
  await challenge.cancel();
});

t.test('behavior: cancel stops the chain at its next slice; the step rejects as cancelled', async (t) => {
  const challenge = cpuChallenge(spec({ rounds: 64 }), { sliceMs: 2 });
  await challenge.prepare();
  const going = challenge.go(GO);
  setTimeout(() => void challenge.cancel(), 20);
  const started = performance.now();
  await t.rejects(going, { code: 'challenge_cancelled' });
  t.ok(performance.now() - started < 5_000, 'long before 64 rounds');
  await t.rejects(challenge.open([{ uuid: GPUS[0]!.uuid, round: 0, row: 0 }]), { code: 'challenge_failed' }, 'nothing to open after it');
});

t.test('error: challenge_failed for rows outside the challenge, steps out of order, and work beyond the simulated size', async (t) => {
  const challenge = cpuChallenge(spec({ rounds: 1, gpus: [GPUS[0]!] }));
  await t.rejects(challenge.go(GO), { code: 'challenge_failed', message: 'go before the challenge was prepared' });
  await challenge.prepare();
  await challenge.go(GO);
  await t.rejects(challenge.open([{ uuid: GPUS[0]!.uuid, round: 1, row: 0 }, { uuid: 'GPU-sim-other', round: 0, row: 3 }]), {
    code: 'challenge_failed',
    message: 'cannot open GPU-sim-l4-24gb-0 round 1 row 0, GPU-sim-other round 0 row 3: the challenge has 1 rounds of 256 rows on GPU-sim-l4-24gb-0',
  });
  const big = cpuChallenge(spec({ m: 1 << 20, n: 16384, k: 16384 }));
  await t.rejects(big.prepare(), { code: 'challenge_failed', message: /a simulated challenge runs on the CPU and this one is .* multiply-adds, more than/ });
  const real = simulatedChallenges(spec({ simulated: false, gpus: [{ index: 0, uuid: 'GPU-2c1e6a2f-63c4-9a2b-6f56-5c1de4c7c7a0' }] }));
  await t.rejects(real.prepare(), { code: 'challenge_failed', message: /no container runtime to run the GPU program in/ }, 'the default starter proves simulated GPUs only');
});

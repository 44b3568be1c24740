import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { challengeLateness, challengePlan, errorText, findGpuClass, pickOpenings, type ChallengePlan } from '@gpufarm/shared';
import { checkOpenings, solveChain } from '@gpufarm/shared/node';
import { z } from 'zod';
import { type ChallengeOpening, gpuBenchChallengeArgs, GpuBenchSession, spawnGpuBench } from '@gpufarm/agent';

/**
 * The GPU challenge on this machine's real GPUs (scripts/gpu-check.sh runs it; docs/decisions.md,
 * "GPU proof"): first a small chain that the CPU recomputes whole, so the GPU kernels are held to
 * the definitions bit for bit; then, per GPU, its class's own challenge (`challengePlan`), timed
 * from the go to the commitment as the server times it, and its openings checked as the server
 * checks them.
 *
 *   tsx scripts/src/gpu-challenge-check.ts --inventory FILE [--plan class|simulated] -- GPU_BENCH_COMMAND...
 *
 * `--inventory`: `gf-agent inventory`'s JSON (each GPU's UUID and class). `--plan simulated` uses
 * the simulated plan for the timed run (the tests' fake driver). Exit 1 when a check failed.
 */

const inventorySchema = z.object({ gpus: z.array(z.object({ uuid: z.string(), classId: z.string().nullable(), name: z.string() })) });
const hashes = (hex: string) => Array.from({ length: hex.length / 64 }, (_, i) => Buffer.from(hex.slice(i * 64, i * 64 + 64), 'hex'));

interface ChallengeRun {
  roots: Map<string, Buffer[]>;
  gpuSeconds: Map<string, number>;
  /** Seconds from writing the go to reading the commitment. */
  elapsed: number;
  openings: ChallengeOpening[];
}

/**
 * One challenge through gpu-bench's stdin and stdout, with the agent's own driver of it. A
 * program that cannot start, exits early or prints something else ends the check with the
 * driver's one-line reason.
 */
async function runChallenge(command: string[], uuids: string[], plan: Pick<ChallengePlan, 'm' | 'n' | 'k' | 'rounds' | 'checks'>, preSeed: Buffer, goSeed: Buffer): Promise<ChallengeRun> {
  const args = gpuBenchChallengeArgs({ gpus: uuids.map((uuid, index) => ({ index, uuid })), m: plan.m, n: plan.n, k: plan.k, rounds: plan.rounds, preSeed: preSeed.toString('hex') });
  const session = new GpuBenchSession(spawnGpuBench(command, args));
  try {
    await session.ready();
    const wentAt = performance.now();
    const commit = await session.go(goSeed.toString('hex'));
    const elapsed = (performance.now() - wentAt) / 1000;
    const rows = uuids.flatMap((uuid) => pickOpenings(plan, (max) => Math.floor(Math.random() * max)).map((o) => ({ uuid, ...o })));
    const openings = await session.open(rows);
    return { elapsed, roots: new Map(commit.map((c) => [c.uuid, hashes(c.roots)])), gpuSeconds: new Map(commit.map((c) => [c.uuid, c.gpuSeconds])), openings };
  } finally {
    await session.stop();
  }
}

function check(run: ChallengeRun, uuid: string, plan: ChallengePlan | Pick<ChallengePlan, 'm' | 'n' | 'k'>, preSeed: Buffer, goSeed: Buffer): string | null {
  const openings = run.openings.filter((o) => o.uuid === uuid).map((o) => ({ round: o.round, row: o.row, path: hashes(o.path) }));
  return checkOpenings({ preSeed, goSeed, gpu: uuid, roots: run.roots.get(uuid) ?? [], openings, m: plan.m, n: plan.n, k: plan.k });
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({ options: { inventory: { type: 'string' }, plan: { type: 'string', default: 'class' } }, allowPositionals: true });
  if (!values.inventory || positionals.length === 0 || !['class', 'simulated'].includes(values.plan)) {
    console.error('usage: gpu-challenge-check --inventory FILE [--plan class|simulated] -- GPU_BENCH_COMMAND...');
    return 2;
  }
  const gpus = inventorySchema.parse(JSON.parse(readFileSync(values.inventory, 'utf8'))).gpus;
  if (gpus.length === 0) {
    console.log('no GPU in the inventory: nothing to challenge');
    return 1;
  }
  let failed = 0;

  const small = { m: 512, n: 512, k: 1024, rounds: 2, checks: 4 };
  console.log(`exactness: a ${small.m}x${small.n}x${small.k} chain of ${small.rounds} rounds on every GPU, recomputed whole on the CPU`);
  const preSeed = randomBytes(32);
  const goSeed = randomBytes(32);
  const exact = await runChallenge(positionals, gpus.map((g) => g.uuid), small, preSeed, goSeed);
  for (const g of gpus) {
    const cpu = solveChain({ preSeed, goSeed, gpu: g.uuid, ...small });
    const same = cpu.roots.every((root, r) => exact.roots.get(g.uuid)?.[r]?.equals(root));
    const opened = check(exact, g.uuid, small, preSeed, goSeed);
    console.log(`  ${g.uuid} ${g.name}: roots ${same ? 'equal the CPU\'s' : 'DIFFER from the CPU\'s'}; openings ${opened === null ? 'pass' : `fail: ${opened}`}  ${same && opened === null ? 'PASS' : 'FAIL'}`);
    failed += same && opened === null ? 0 : 1;
  }

  for (const g of gpus) {
    const cls = g.classId ? findGpuClass(g.classId) : undefined;
    const plan = values.plan === 'simulated' ? challengePlan('simulated') : cls ? challengePlan(cls) : null;
    if (!plan) {
      console.log(`${g.uuid} ${g.name}: no curated class (${g.classId ?? 'none'}), so no class challenge to time`);
      continue;
    }
    const label = values.plan === 'simulated' ? 'the simulated plan' : `${cls!.label}'s plan`;
    console.log(`timed: ${g.uuid} ${g.name}, ${label}: ${plan.m}x${plan.n}x${plan.k}, ${plan.rounds} rounds`);
    const pre = randomBytes(32);
    const go = randomBytes(32);
    const run = await runChallenge(positionals, [g.uuid], plan, pre, go);
    const late = challengeLateness(plan, run.elapsed);
    const opened = check(run, g.uuid, plan, pre, go);
    const ops = 2 * plan.m * plan.n * plan.k * plan.rounds;
    const gpuSeconds = run.gpuSeconds.get(g.uuid) ?? 0;
    console.log(`  go to commitment ${run.elapsed.toFixed(3)} s, GPU time ${gpuSeconds.toFixed(3)} s, ${(ops / gpuSeconds / 1e12).toFixed(1)} int8 TOPS`);
    if (plan.expectedSeconds !== null) {
      console.log(`  expected ${plan.expectedSeconds.toFixed(3)} s at the class's expected rate (${(plan.expectedSeconds / run.elapsed).toFixed(2)}x of it), deadline ${plan.deadlineSeconds!.toFixed(3)} s`);
    }
    console.log(`  deadline ${late === null ? 'met' : `missed: ${late}`}; ${plan.checks} openings ${opened === null ? 'pass' : `fail: ${opened}`}  ${late === null && opened === null ? 'PASS' : 'FAIL'}`);
    failed += late === null && opened === null ? 0 : 1;
  }
  console.log(failed === 0 ? 'PASS: the GPU challenge' : `FAIL: ${failed} challenge check(s) failed`);
  return failed === 0 ? 0 : 1;
}

process.exitCode = await main().catch((err: unknown) => {
  console.error(`gpu-challenge-check: ${errorText(err)}`);
  return 1;
});

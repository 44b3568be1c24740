import type { GpuFamily } from '../catalog/gpu-classes.js';

/**
 * How big a GPU challenge is for a class, and how long it may take (docs/decisions.md, "GPU
 * proof"). The work must last seconds on the claimed class, so its time tells classes apart
 * and a network round trip does not; the server's check must stay cheap (`CHALLENGE_CHECKS`
 * rows of k · n multiply-adds per GPU).
 */

/** n = k: the server recomputes a row in n · k = 16.8 M multiply-adds. */
export const CHALLENGE_N = 4096;
export const CHALLENGE_K = 4096;
/** Seconds of work at the class's expected int8 rate. */
export const CHALLENGE_TARGET_SECONDS = 5;
/** A round lasts about this long at the expected rate (m is rounded down to a power of two). */
export const CHALLENGE_ROUND_SECONDS = 0.004;
/** Rows opened per GPU, drawn after the commitment: a machine that did a fraction f of the work passes with f^16. */
export const CHALLENGE_CHECKS = 16;
/**
 * The commitment must arrive within the expected time divided by this, plus
 * `CHALLENGE_ALLOWANCE_SECONDS` for the link (a go one way, the commitment the other: a round
 * trip) and the relay through the agent: a GPU slower than 0.6 of its class's expected rate
 * fails, as a GPU below the class's tier-B figure (0.7) nearly does. Setting up (the container,
 * the driver, the code, B) is done before the machine says it is ready, outside the time.
 */
export const CHALLENGE_MIN_RATE_RATIO = 0.6;
export const CHALLENGE_ALLOWANCE_SECONDS = 1;
/** A simulated GPU: a small product on the CPU, no timing (it never proves a class). */
export const SIMULATED_CHALLENGE = { m: 256, n: 256, k: 256, rounds: 4 } as const;

/**
 * A class's expected int8 tensor rate, operations per second: twice its expected FP16 matmul
 * figure (FP32 accumulation), four times on GeForce cards, whose FP16 with FP32 accumulation
 * runs at half rate while int8 does not (NVIDIA's architecture whitepapers, Turing to
 * Blackwell: dense int8 TOPS = 2 × dense FP16 TFLOPS with FP16 accumulation). Our int8 kernel's
 * efficiency is taken to be the FP16 kernel's until a device check measures it.
 */
export function expectedInt8OpsPerSecond(gpuClass: { expectedMatmulGflops: number; family: GpuFamily }): number {
  return gpuClass.expectedMatmulGflops * 1e9 * (gpuClass.family === 'consumer' ? 4 : 2);
}

export interface ChallengePlan {
  m: number;
  n: number;
  k: number;
  rounds: number;
  checks: number;
  /** The whole chain's duration at the class's expected rate; null for a simulated GPU. */
  expectedSeconds: number | null;
  /** The latest the commitment may arrive after "go"; null: no limit (simulated). */
  deadlineSeconds: number | null;
}

function floorPowerOfTwo(v: number): number {
  return 2 ** Math.floor(Math.log2(v));
}

/** The challenge for a class (a real GPU) or for a simulated GPU. */
export function challengePlan(target: { expectedMatmulGflops: number; family: GpuFamily } | 'simulated'): ChallengePlan {
  if (target === 'simulated') return { ...SIMULATED_CHALLENGE, checks: CHALLENGE_CHECKS, expectedSeconds: null, deadlineSeconds: null };
  const rate = expectedInt8OpsPerSecond(target);
  const perRow = 2 * CHALLENGE_N * CHALLENGE_K;
  const m = Math.min(Math.max(floorPowerOfTwo((rate * CHALLENGE_ROUND_SECONDS) / perRow), CHALLENGE_N), 1 << 18);
  const rounds = Math.max(8, Math.ceil((CHALLENGE_TARGET_SECONDS * rate) / (perRow * m)));
  const expectedSeconds = (rounds * m * perRow) / rate;
  return {
    m,
    n: CHALLENGE_N,
    k: CHALLENGE_K,
    rounds,
    checks: CHALLENGE_CHECKS,
    expectedSeconds,
    deadlineSeconds: expectedSeconds / CHALLENGE_MIN_RATE_RATIO + CHALLENGE_ALLOWANCE_SECONDS,
  };
}

/** The rows to open, drawn uniformly over rounds and rows with `random(max)` (an integer below max). */
export function pickOpenings(plan: Pick<ChallengePlan, 'm' | 'rounds' | 'checks'>, random: (max: number) => number): Array<{ round: number; row: number }> {
  return Array.from({ length: plan.checks }, () => ({ round: random(plan.rounds), row: random(plan.m) }));
}

/** Whether the commitment came in time: null when it did, else why not. */
export function challengeLateness(plan: Pick<ChallengePlan, 'expectedSeconds' | 'deadlineSeconds'>, elapsedSeconds: number): string | null {
  if (plan.deadlineSeconds === null || plan.expectedSeconds === null || elapsedSeconds <= plan.deadlineSeconds) return null;
  return `the commitment came ${elapsedSeconds.toFixed(2)} s after the go, past the ${plan.deadlineSeconds.toFixed(2)} s this class allows (${plan.expectedSeconds.toFixed(2)} s of work at its expected rate): the GPU is slower than the class it claims`;
}

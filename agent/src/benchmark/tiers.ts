import { gpuClassReference, HOST_BENCHMARK_EXPECTATIONS, type BenchmarkTier } from '@gpufarm/shared';

/**
 * The tier rule (pure). Each measured figure (`matmulGflops`: dense FP16/BF16 tensor matmul;
 * `memoryBandwidthMbps`: device memory bandwidth) is divided by the class's expected figure
 * (`gpuClassReference`: a curated class's tier-A figures, a derived class's generation floor);
 * the machine's tier comes from its worst ratio:
 *
 *   ratio >= 1.05 -> S    ratio >= 0.90 -> A    ratio >= 0.70 -> B    otherwise C
 *
 * A derived class's tier is at most A: beating the weakest known card of its generation says
 * nothing about being a fast card.
 * Host figures count with their own expectations (`HOST_BENCHMARK_EXPECTATIONS`) but can lower
 * the tier to B at most: a slow disk makes a machine worse, not useless.
 */
export const TIER_THRESHOLDS: ReadonlyArray<{ tier: BenchmarkTier; minRatio: number }> = [
  { tier: 'S', minRatio: 1.05 },
  { tier: 'A', minRatio: 0.9 },
  { tier: 'B', minRatio: 0.7 },
  { tier: 'C', minRatio: 0 },
];

const ORDER: BenchmarkTier[] = ['S', 'A', 'B', 'C'];

export function tierForRatio(ratio: number): BenchmarkTier {
  for (const t of TIER_THRESHOLDS) if (ratio >= t.minRatio) return t.tier;
  return 'C';
}

export interface TierInput {
  /** `architecture`: the GPU's generation, which a derived class is judged by (older callers leave it out). */
  gpus: Array<{ classId: string | null; architecture?: string | null; matmulGflops: number; memoryBandwidthMbps: number }>;
  host: { diskWriteMBps: number | null; sha256MBps: number | null };
}

/** The tier, or null when no GPU figure exists or a GPU's class is unknown. */
export function tierFor(input: TierInput): BenchmarkTier | null {
  if (input.gpus.length === 0) return null;
  let worst = Infinity;
  let best: BenchmarkTier = 'S';
  for (const g of input.gpus) {
    const ref = g.classId ? gpuClassReference(g.classId, g.architecture) : undefined;
    if (!ref) return null;
    worst = Math.min(worst, g.matmulGflops / ref.matmulGflops, g.memoryBandwidthMbps / ref.memoryBandwidthMbps);
    if (ref.maxTier === 'A') best = 'A';
  }
  let tier = tierForRatio(worst);
  if (ORDER.indexOf(tier) < ORDER.indexOf(best)) tier = best;
  const hostRatios = [
    input.host.diskWriteMBps === null ? Infinity : input.host.diskWriteMBps / HOST_BENCHMARK_EXPECTATIONS.diskWriteMBps,
    input.host.sha256MBps === null ? Infinity : input.host.sha256MBps / HOST_BENCHMARK_EXPECTATIONS.sha256MBps,
  ];
  const hostTier = ORDER[Math.min(ORDER.indexOf(tierForRatio(Math.min(...hostRatios))), ORDER.indexOf('B'))]!;
  if (ORDER.indexOf(hostTier) > ORDER.indexOf(tier)) tier = hostTier;
  return tier;
}

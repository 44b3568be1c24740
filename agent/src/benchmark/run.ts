import type { BenchmarkResult } from '@gpufarm/shared';
import type { InventorySnapshot } from '../inventory/snapshot.js';
import type { GpuBenchmarkRunner } from './gpu-container.js';
import { tierFor } from './tiers.js';
import { errorText } from '@gpufarm/shared';

export interface BenchmarkDeps {
  host: { diskWriteMBps: () => Promise<number>; sha256MBps: () => Promise<number> | number };
  /** Null when Docker cannot be reached. */
  gpu: GpuBenchmarkRunner | null;
  now: () => Date;
}

/**
 * Runs the benchmark for a machine as its inventory describes it. Simulated machines get host
 * figures and `status: 'simulated'` with no GPU figure; a real machine runs the GPU container
 * only when its health is proven (the probe passed), and otherwise says why it did not.
 */
export async function runBenchmark(deps: BenchmarkDeps, snapshot: InventorySnapshot): Promise<BenchmarkResult> {
  const host = { diskWriteMBps: await deps.host.diskWriteMBps(), sha256MBps: await deps.host.sha256MBps() };
  const ranAt = deps.now().toISOString();
  if (snapshot.simulated) {
    return { status: 'simulated', reason: 'simulated GPUs: no GPU was measured, so no GPU figure and no tier are reported', tier: null, host, gpus: [], ranAt };
  }
  if (snapshot.health.status !== 'healthy') {
    return { status: 'not_run', reason: `the GPU benchmark container was not run: ${snapshot.health.reason ?? 'the machine is unhealthy'}`, tier: null, host, gpus: [], ranAt };
  }
  if (deps.gpu === null) return { status: 'not_run', reason: 'the GPU benchmark container was not run: Docker cannot be reached', tier: null, host, gpus: [], ranAt };
  try {
    // Only offered GPUs are measured: the program is not built for older generations.
    const offered = snapshot.detected.filter((g) => g.classId !== null);
    if (offered.length === 0) return { status: 'not_run', reason: 'the GPU benchmark container was not run: no GPU of this machine is offered (see gf-agent inventory)', tier: null, host, gpus: [], ranAt };
    const gpus = await deps.gpu.run(offered.map((g) => ({ index: g.index, uuid: g.uuid })));
    const measured = gpus.map((f) => {
      const g = offered.find((d) => d.uuid === f.uuid);
      return { classId: g?.classId ?? null, architecture: g?.architecture ?? null, ...f };
    });
    const tier = tierFor({ gpus: measured, host });
    return { status: 'completed', reason: tier === null ? 'a GPU model is not in the class catalog: no tier' : null, tier, host, gpus, ranAt };
  } catch (err) {
    return { status: 'not_run', reason: `the GPU benchmark container failed: ${errorText(err)}`, tier: null, host, gpus: [], ranAt };
  }
}

import { findGpuClass, GpufarmError, gpuClassIds, type GpuInventory } from '@gpufarm/shared';

/**
 * Simulated GPUs for a machine without any (development, CI, demos): `"2x h100-80gb-sxm"` or
 * `"1x rtx-4090-24gb, 2x l4-24gb"`. Each gets a stable fake UUID and `simulated: true`; live
 * figures are null because nothing measures them.
 */
export interface SimulatedGpuSpec {
  count: number;
  classId: string;
}

/** Thrown with a message naming the bad part of the spec. */
export class SimulatedGpuSpecError extends GpufarmError<'invalid_simulated_gpus'> {
  constructor(message: string) {
    super('invalid_simulated_gpus', message);
  }
}

export function parseSimulatedGpus(spec: string): SimulatedGpuSpec[] {
  const parts = spec.split(',').map((p) => p.trim()).filter(Boolean);
  if (parts.length === 0) throw new SimulatedGpuSpecError('simulated GPUs: give at least one, such as "2x h100-80gb-sxm"');
  return parts.map((part) => {
    const m = /^(\d{1,2})\s*x\s*([a-z0-9-]+)$/i.exec(part);
    if (!m) throw new SimulatedGpuSpecError(`simulated GPUs: "${part}" is not COUNTx CLASS, such as "2x h100-80gb-sxm"`);
    const count = Number(m[1]);
    const classId = m[2]!.toLowerCase();
    if (count < 1 || count > 16) throw new SimulatedGpuSpecError(`simulated GPUs: "${part}" must have between 1 and 16 GPUs`);
    if (!findGpuClass(classId)) throw new SimulatedGpuSpecError(`simulated GPUs: unknown class "${classId}"; known: ${gpuClassIds.join(', ')}`);
    return { count, classId };
  });
}

export function simulatedGpus(specs: SimulatedGpuSpec[]): GpuInventory[] {
  const gpus: GpuInventory[] = [];
  for (const { count, classId } of specs) {
    const cls = findGpuClass(classId)!;
    for (let i = 0; i < count; i++) {
      const index = gpus.length;
      gpus.push({
        index,
        uuid: `GPU-sim-${classId}-${index}`,
        name: cls.model,
        classId,
        vramBytes: cls.vramBytes,
        driverVersion: 'simulated',
        cudaVersion: 'simulated',
        temperatureC: null,
        utilizationPercent: null,
        memoryUsedBytes: null,
        powerDrawWatts: null,
        powerLimitWatts: null,
        simulated: true,
      });
    }
  }
  return gpus;
}

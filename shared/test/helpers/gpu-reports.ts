import type { GpuHealthReport } from '../../src/index.js';

/**
 * A healthy GPU's health report, as an agent reads it from nvidia-smi: no ECC error, retired page
 * or row remap, no slowdown, its PCIe link at its generation, no XID; 50 °C and 50% busy, slowdown
 * at 85 °C and shutdown at 90 °C. `over` replaces whole fields; the UUID follows the index
 * (`GPU-1`) unless given. The verdict tests and the heartbeat bench build their GPUs from it.
 *
 * @example gpuHealthReport({ index: 2, uuid: null, lost: true, lostReason: 'GPU is lost' })
 */
export function gpuHealthReport(over: Partial<GpuHealthReport> = {}): GpuHealthReport {
  const index = over.index ?? 0;
  return {
    index, uuid: `GPU-${index}`, pciBusId: null, lost: false, lostReason: null,
    ecc: { volatileCorrectable: 0, volatileUncorrectable: 0, aggregateCorrectable: 0, aggregateUncorrectable: 0 },
    retiredPages: { singleBit: 0, doubleBit: 0, pending: false },
    remappedRows: { correctable: 0, uncorrectable: 0, pending: false, failure: false },
    clockEvents: { hwSlowdown: false, hwThermalSlowdown: false, hwPowerBrakeSlowdown: false, swThermalSlowdown: false, swPowerCap: false },
    temperatureC: 50, slowdownTempC: 85, shutdownTempC: 90, fanPercent: 40, utilizationPercent: 50,
    pcie: { currentGen: 4, maxGen: 4, currentWidth: 16, maxWidth: 16 },
    xids: [],
    ...over,
  };
}

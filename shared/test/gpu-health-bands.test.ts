import t from 'tap';
import { gpuHealthVerdict, liveFigureBand, verdictClockEdge, XID_WARNING_WINDOW_MS, type GpuHealthReport } from '../src/index.js';
import { gpuHealthReport } from './helpers/gpu-reports.js';

/** A healthy GPU's report with `over` on top; the UUID is the one these tests always used. */
const report = (over: Partial<GpuHealthReport> = {}) => gpuHealthReport({ uuid: 'GPU-a', ...over });

const NOW = Date.parse('2026-11-29T12:00:00.000Z');

t.test('behavior: live figures in one band give one verdict, and every band its own where the verdict reads it', async (t) => {
  const temps = [null, -5, 0, 50, 84.9, 85, 89.99, 90, 94, 95, 130];
  const utils = [null, 0, 29.9, 30, 31, 100];
  const variants = [
    report(),
    report({ slowdownTempC: null }),
    report({ shutdownTempC: null }),
    report({ slowdownTempC: null, shutdownTempC: null }),
    report({ slowdownTempC: 95, shutdownTempC: 90 }),
    report({ pcie: { currentGen: 3, maxGen: 4, currentWidth: 16, maxWidth: 16 } }),
    report({ pcie: { currentGen: 3, maxGen: 4, currentWidth: 8, maxWidth: 16 }, clockEvents: { hwSlowdown: true, hwThermalSlowdown: false, hwPowerBrakeSlowdown: false, swThermalSlowdown: false, swPowerCap: false } }),
  ];
  for (const base of variants) {
    const verdictOfBand = new Map<number, string>();
    for (const temperatureC of temps) {
      for (const utilizationPercent of utils) {
        const band = liveFigureBand(base, temperatureC, utilizationPercent);
        const verdict = JSON.stringify(gpuHealthVerdict({ ...base, temperatureC, utilizationPercent }, new Date(NOW)));
        const seen = verdictOfBand.get(band);
        if (seen === undefined) verdictOfBand.set(band, verdict);
        else if (seen !== verdict) t.fail(`band ${band} gave two verdicts: ${seen} and ${verdict} (temperature ${temperatureC}, utilization ${utilizationPercent})`);
      }
    }
    // With both thresholds and a PCIe link below its generation, every band reads differently.
    if (base.pcie.currentGen === 3 && base.pcie.currentWidth === 16) t.equal(new Set(verdictOfBand.values()).size, 6, 'six bands, six verdicts');
  }
  const belowGen = report({ pcie: { currentGen: 3, maxGen: 4, currentWidth: 16, maxWidth: 16 } });
  t.equal(liveFigureBand(belowGen, 50, 50), 1);
  t.equal(liveFigureBand(belowGen, 85, 0), 2);
  t.equal(liveFigureBand(belowGen, 90, 30), 5);
  t.equal(liveFigureBand(report(), 50, 0), liveFigureBand(report(), 50, 100), 'a link at its generation: utilization is not read');
});

t.test('behavior: the clock changes a verdict only at the end of an open warning XID window', async (t) => {
  const lastAt = new Date(NOW - XID_WARNING_WINDOW_MS + 60_000).toISOString();
  const warned = report({ xids: [{ code: 61, count: 1, lastAt, detail: '' }, { code: 79, count: 1, lastAt: new Date(NOW).toISOString(), detail: '' }, { code: 13, count: 2, lastAt, detail: '' }] });
  const edge = verdictClockEdge(warned, NOW);
  t.equal(edge, NOW + 60_000, 'XID 61 ends its window in a minute; XID 79 (failed) and 13 (ignored) do not fade');
  const words = (at: number) => JSON.stringify(gpuHealthVerdict(warned, new Date(at)));
  t.equal(words(edge - 1), words(NOW), 'the same verdict up to the edge');
  t.not(words(edge), words(NOW), 'another at the edge');
  t.equal(verdictClockEdge(warned, edge), Number.POSITIVE_INFINITY, 'a window that ended is no edge');
  t.equal(verdictClockEdge(report(), NOW), Number.POSITIVE_INFINITY, 'no XID, no edge');
  t.equal(verdictClockEdge(report({ xids: [{ code: 61, count: 1, lastAt: new Date(NOW + 5000).toISOString(), detail: '' }] }), NOW), NOW + 5000 + XID_WARNING_WINDOW_MS, 'an XID stamped ahead of the clock');
});

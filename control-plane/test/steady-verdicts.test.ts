import t from 'tap';
import { XID_WARNING_WINDOW_MS, type GpuHealthReport, type HeartbeatMessage } from '@gpufarm/shared';
import { gpuHealthReport } from '@gpufarm/shared/testing/gpu-reports';
import { verdictsHold, verdictWindow } from '../src/agent-gateway/steady-verdicts.js';
import { judgeReports, verdictKey, withLiveFigures } from '../src/fleet/gpu-health.js';

const NOW = Date.parse('2026-11-29T12:00:00.000Z');

/** A healthy GPU's report at `index` (UUID `GPU-<index>`), with `over` on top. */
const report = (index: number, over: Partial<GpuHealthReport> = {}) => gpuHealthReport({ index, ...over });

/** The last reports of a machine whose GPUs read differently: a PCIe link below its generation, warning XIDs fading, a GPU without UUID. */
const REPORTS: GpuHealthReport[] = [
  report(0, { pcie: { currentGen: 3, maxGen: 4, currentWidth: 16, maxWidth: 16 } }),
  report(1, { xids: [{ code: 61, count: 1, lastAt: new Date(NOW - XID_WARNING_WINDOW_MS + 30_000).toISOString(), detail: '' }, { code: 74, count: 3, lastAt: new Date(NOW - XID_WARNING_WINDOW_MS + 90_000).toISOString(), detail: '' }] }),
  report(2, { uuid: null, lost: true, lostReason: 'GPU is lost', temperatureC: null, utilizationPercent: null }),
  report(3, { slowdownTempC: null }),
];

/** A seeded generator: the test replays the same heartbeats every run. */
function random(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1_103_515_245 + 12_345) % 2 ** 31;
    return s / 2 ** 31;
  };
}

t.test('behavior: while the verdicts stand they are, to the letter, what judging every heartbeat gives', async (t) => {
  const next = random(7);
  let window = verdictWindow(REPORTS, verdictKey(judgeReports(REPORTS, new Date(NOW))), NOW);
  let at = NOW;
  let held = 0;
  let judged = 0;
  for (let beat = 0; beat < 3000; beat++) {
    // Mostly forward in 0-200 ms steps (two fading XIDs are crossed); now and then the clock is set back.
    at += next() < 0.01 ? -5_000 : Math.floor(next() * 200);
    // Figures that move without crossing a threshold, now and then across one. Usually in place; sometimes listed in another order, or a GPU missing from the list.
    const gpus: HeartbeatMessage['gpus'] = [0, 1, 2, 3].map((i) => ({
      index: i, uuid: i === 2 ? 'GPU-2' : `GPU-${i}`, temperatureC: next() < 0.02 ? null : next() < 0.05 ? 84 + Math.floor(next() * 10) : 60 + Math.floor(next() * 24), utilizationPercent: next() < 0.02 ? null : next() < 0.05 ? Math.floor(next() * 100) : Math.floor(next() * 30),
      memoryUsedBytes: null, powerDrawWatts: null,
    }));
    const live = next() < 0.1 ? [...gpus].reverse() : next() < 0.05 ? gpus.slice(1) : gpus;
    const reports = withLiveFigures(REPORTS, live);
    const full = verdictKey(judgeReports(reports, new Date(at)));
    if (verdictsHold(window, REPORTS, live, at)) {
      held++;
      if (window.key !== full) t.fail(`beat ${beat}: the verdicts stood but judging gives others`);
    } else {
      judged++;
      window = verdictWindow(reports, full, at);
    }
  }
  t.ok(held > 100 && judged > 100, `both ways taken (${held} stood, ${judged} judged again)`);
  t.ok(window.until === Number.POSITIVE_INFINITY || window.until > at, 'a window that ended is never kept');
});

t.test('behavior: a band crossed, a window ended, the clock set back, or other reports: judged again', async (t) => {
  const live = (temperatureC: number, utilizationPercent: number): HeartbeatMessage['gpus'] =>
    REPORTS.map((r) => ({ index: r.index, uuid: r.uuid ?? 'GPU-2', temperatureC, utilizationPercent, memoryUsedBytes: null, powerDrawWatts: null }));
  const reports = withLiveFigures(REPORTS, live(60, 10));
  const window = verdictWindow(reports, verdictKey(judgeReports(reports, new Date(NOW))), NOW);
  t.equal(window.until, NOW + 30_000, "the first warning XID's window ends in 30 s");
  t.ok(verdictsHold(window, REPORTS, live(84, 29), NOW + 1000), 'the same bands');
  t.notOk(verdictsHold(window, REPORTS, live(85, 10), NOW + 1000), 'at the slowdown threshold');
  t.notOk(verdictsHold(window, REPORTS, live(60, 30), NOW + 1000), 'loaded, with a PCIe link below its generation');
  t.notOk(verdictsHold(window, REPORTS, live(60, 10), NOW + 30_000), 'at the end of the window');
  t.notOk(verdictsHold(window, REPORTS, live(60, 10), NOW - 1), 'the clock set back');
  t.notOk(verdictsHold(window, REPORTS.slice(1), live(60, 10), NOW + 1000), 'other reports');
});

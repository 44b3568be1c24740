import { liveFigureBand, verdictClockEdge, type GpuHealthReport, type HeartbeatMessage } from '@gpufarm/shared';

/**
 * When a link's GPU verdicts must be judged again. A heartbeat without GPU health reports is
 * judged on the last reports with its live temperature and utilization (`withLiveFigures`),
 * and the verdict reads those figures only against thresholds, and the clock only at the end
 * of a warning XID's window (`liveFigureBand`, `verdictClockEdge`). So the verdicts judged once
 * stand, to the letter, while each GPU's band is the one judged and the clock is inside the
 * window; judging every heartbeat of every machine again was a tenth of the gateway's CPU.
 */
export interface VerdictWindow {
  /** `verdictKey` of the verdicts judged. */
  key: string;
  /** Each report's `liveFigureBand` as judged, in the reports' order. */
  bands: readonly number[];
  /** When (epoch ms) they were judged: a clock set back may reopen an XID's window. */
  from: number;
  /** When (epoch ms) a warning XID's window ends (`verdictClockEdge`), Infinity when none. */
  until: number;
}

/** The window of verdicts `key`, judged at `nowMs` from `reports` as judged (live figures in). */
export function verdictWindow(reports: readonly GpuHealthReport[], key: string, nowMs: number): VerdictWindow {
  const bands: number[] = [];
  let until = Number.POSITIVE_INFINITY;
  for (const r of reports) {
    bands.push(liveFigureBand(r, r.temperatureC, r.utilizationPercent));
    until = Math.min(until, verdictClockEdge(r, nowMs));
  }
  return { key, bands, from: nowMs, until };
}

/**
 * Whether `reports` (the last sent on the link, from which `window` was judged) with a
 * heartbeat's live figures still give `window.key` at `nowMs`. The live figures are matched to
 * the reports as `withLiveFigures` matches them: by UUID, same place first; none for a report
 * without one.
 */
export function verdictsHold(window: VerdictWindow, reports: readonly GpuHealthReport[], live: HeartbeatMessage['gpus'], nowMs: number): boolean {
  if (nowMs < window.from || nowMs >= window.until || window.bands.length !== reports.length) return false;
  for (let i = 0; i < reports.length; i++) {
    const r = reports[i]!;
    let temperatureC = r.temperatureC;
    let utilizationPercent = r.utilizationPercent;
    if (r.uuid !== null) {
      const now = live[i]?.uuid === r.uuid ? live[i] : live.find((g) => g.uuid === r.uuid);
      if (now) {
        temperatureC = now.temperatureC;
        utilizationPercent = now.utilizationPercent;
      }
    }
    if (liveFigureBand(r, temperatureC, utilizationPercent) !== window.bands[i]) return false;
  }
  return true;
}

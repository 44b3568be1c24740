import { measure } from './load.js';
import type { BenchRow } from './report.js';
import type { SectionContext } from './capacity.js';

/** The bench's control plane serves `/metrics` on its API port to this token (`GF_METRICS_TOKEN`). */
export const BENCH_METRICS_TOKEN = 'bench-metrics-token-0123456789abcdef';

/**
 * What a Prometheus scrape of the control plane costs at the seeded fleet: `GET /metrics` as one
 * scraper calls it (one connection), with the database gauges (jobs by state, machines, fleet GPUs
 * by class and state) read per scrape. Informational: no target.
 */
export async function metricsSection(ctx: SectionContext): Promise<BenchRow[]> {
  const label = 'GET /metrics';
  if (!ctx.wanted(label)) return [];
  const headers = { authorization: `Bearer ${BENCH_METRICS_TOKEN}` };
  const sample = await fetch(`${ctx.baseUrl}/metrics`, { headers });
  if (!sample.ok) throw new Error(`/metrics answered ${sample.status}: ${(await sample.text()).slice(0, 300)}`);
  const text = await sample.text();
  const series = text.split('\n').filter((line) => line !== '' && !line.startsWith('#')).length;
  ctx.log(`  ${label} (one connection, as a scraper) ...`);
  const result = await measure({ baseUrl: ctx.baseUrl, path: '/metrics', connections: 1, durationSeconds: ctx.durationSeconds, warmupSeconds: ctx.warmupSeconds, cpu: ctx.cpu, headers });
  return [{ label, note: `one scraper, ${series} series, ${Math.round(text.length / 1024)} KiB`, result }];
}

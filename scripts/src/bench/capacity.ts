import type { CpuSubjects } from './cpu.js';
import { measure } from './load.js';
import type { BenchRow } from './report.js';

export interface SectionContext {
  baseUrl: string;
  connections: number;
  durationSeconds: number;
  warmupSeconds: number;
  /** Whose CPU time is counted. */
  cpu: CpuSubjects;
  /** Whether a row of the section is measured (`--only`, BENCH_SECTIONS); the baseline always is. */
  wanted(label: string): boolean;
  log(line: string): void;
}

/**
 * The public read endpoints: `GET /v1` (the cheapest endpoint, the baseline), two filtered
 * capacity queries (one on whole offers, one on machine attributes), the default capacity
 * list (200 offers) and pricing. Targets at 10,000 machines on 2 cores: filtered >= 1/4 of
 * the baseline with p99 < 20 ms, default >= 1/20 with p99 < 100 ms.
 */
export async function capacitySection(ctx: SectionContext): Promise<BenchRow[]> {
  const endpoints: Omit<BenchRow, 'result'>[] = [
    { label: 'GET /v1', baseline: true },
    { label: 'GET /v1/capacity?model=h100-80gb-sxm&region=europe-west&limit=20', target: { minRatio: 1 / 4, maxP99Ms: 20 } },
    // Informational: filters on machine attributes (uptime, tier) scan machine rows instead of
    // picking whole offers; no target of its own.
    { label: 'GET /v1/capacity?region=Europe&minUptime=95&tier=A&limit=20' },
    { label: 'GET /v1/capacity', note: `${await offersOnPage(ctx.baseUrl, '/v1/capacity')} offers`, target: { minRatio: 1 / 20, maxP99Ms: 100 } },
    { label: 'GET /v1/pricing' },
  ];
  const rows: BenchRow[] = [];
  for (const endpoint of endpoints.filter((e) => e.baseline || ctx.wanted(e.label))) {
    const path = endpoint.label.replace(/^GET /, '');
    ctx.log(`  ${endpoint.label} ...`);
    const result = await measure({ baseUrl: ctx.baseUrl, path, connections: ctx.connections, durationSeconds: ctx.durationSeconds, warmupSeconds: ctx.warmupSeconds, cpu: ctx.cpu });
    rows.push({ ...endpoint, result });
  }
  return rows;
}

/** How many offers one answer of a capacity path holds. */
async function offersOnPage(baseUrl: string, path: string): Promise<number> {
  const response = await fetch(`${baseUrl}${path}`, { headers: { 'x-forwarded-for': '192.0.2.3' } });
  if (!response.ok) throw new Error(`${path} answered ${response.status}: ${(await response.text()).slice(0, 500)}`);
  return ((await response.json()) as { data: unknown[] }).data.length;
}

import type { LoadResult } from './load.js';

/** A performance goal relative to the baseline endpoint of the run. */
export interface Target {
  /** At least this share of the baseline's requests per second. */
  minRatio: number;
  /** 99th-percentile latency below this. */
  maxP99Ms: number;
}

/** One measured endpoint: what each bench section returns. */
export interface BenchRow {
  /** The request measured, e.g. `GET /v1/capacity`. */
  label: string;
  /** What the request does or carries, shown after the label in docs/benchmarks.md's table. */
  note?: string;
  result: LoadResult;
  /** The row the ratios are computed against (the cheapest endpoint). */
  baseline?: boolean;
  target?: Target;
  /** The target as docs/benchmarks.md states it, when it is not a ratio of the baseline (`≥ 1,000/s, p99 < 100 ms`). */
  targetText?: string;
  /**
   * What the ratio is taken against when not the baseline row: the same endpoint measured again
   * beside this row (alternating with it), so that a machine that got busier between the two
   * does not decide the ratio.
   */
  reference?: LoadResult;
}

export interface RowVerdict {
  ratio: number | null;
  pass: boolean | null;
}

export function verdict(row: BenchRow, baseline: BenchRow | undefined): RowVerdict {
  const against = row.reference ?? baseline?.result;
  const ratio = against && against.requestsPerSecond > 0 ? row.result.requestsPerSecond / against.requestsPerSecond : null;
  if (!row.target || ratio === null) return { ratio, pass: null };
  return { ratio, pass: ratio >= row.target.minRatio && row.result.p99Ms < row.target.maxP99Ms };
}

const pad = (text: string, width: number, right = false) => (right ? text.padStart(width) : text.padEnd(width));

/** The results table: endpoint, req/s, p50, p99, ratio to the baseline, target and verdict. */
export function formatTable(rows: readonly BenchRow[]): string {
  const baseline = rows.find((r) => r.baseline);
  const lines = rows.map((row) => {
    const { ratio, pass } = verdict(row, baseline);
    const target = row.baseline ? 'baseline' : row.targetText ? row.targetText : row.target ? `>= 1/${Math.round(1 / row.target.minRatio)} req/s, p99 < ${row.target.maxP99Ms} ms` : '-';
    return [
      row.label,
      row.result.requestsPerSecond.toFixed(0),
      String(row.result.p50Ms),
      String(row.result.p99Ms),
      ratio === null ? '-' : ratio.toFixed(3),
      String(row.result.non2xx),
      row.result.serverCpuUsPerRequest.toFixed(0),
      row.result.postgresCpuUsPerRequest.toFixed(0),
      target,
      pass === null ? '' : pass ? 'PASS' : 'FAIL',
    ];
  });
  const header = ['endpoint', 'req/s', 'p50 ms', 'p99 ms', 'ratio', 'non-2xx', 'server CPU µs/req', 'PG CPU µs/req', 'target', 'result'];
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)));
  const numeric = new Set([1, 2, 3, 4, 5, 6, 7]);
  const render = (cells: string[]) => cells.map((c, i) => pad(c, widths[i]!, numeric.has(i))).join('  ').trimEnd();
  return [render(header), widths.map((w) => '-'.repeat(w)).join('  '), ...lines.map(render)].join('\n');
}

const thousands = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });

/**
 * The rows as docs/benchmarks.md's tables write them (markdown, header first), so a run's
 * figures can be pasted as they are.
 */
export function markdownTable(rows: readonly BenchRow[]): string[] {
  const baseline = rows.find((r) => r.baseline);
  const lines = ['| endpoint | req/s | p50 ms | p99 ms | ratio to `GET /v1` | server µs/req | PostgreSQL µs/req | target |', '|---|---|---|---|---|---|---|---|'];
  for (const row of rows) {
    const { ratio, pass } = verdict(row, baseline);
    const goal = row.targetText ?? (row.target ? `≥ 1/${Math.round(1 / row.target.minRatio)}, p99 < ${row.target.maxP99Ms} ms` : null);
    const target = row.baseline ? 'baseline' : goal === null ? 'none' : pass === null ? goal : `${goal}: ${pass ? 'met' : 'missed'}`;
    const { result } = row;
    const cells = [
      `\`${row.label}\`${row.note ? ` (${row.note})` : ''}`,
      thousands.format(result.requestsPerSecond),
      String(result.p50Ms),
      String(result.p99Ms),
      ratio === null ? '-' : ratio.toFixed(3),
      thousands.format(result.serverCpuUsPerRequest),
      thousands.format(result.postgresCpuUsPerRequest),
      target,
    ];
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines;
}

/** The median of some figures (the mean of the middle two for an even count). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * A standalone section's table: the header row, a rule, then the rows; every column but the
 * first and the last two (target, result) holds figures and is right-aligned.
 */
export function alignedTable(rows: readonly string[][]): string[] {
  const header = rows[0]!;
  const widths = header.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  const numeric = (i: number) => i >= 1 && i < header.length - 2;
  const render = (r: readonly string[]) => r.map((c, i) => pad(c, widths[i]!, numeric(i))).join('  ').trimEnd();
  return [render(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(render)];
}

import { useEffect, useId, useRef } from 'react';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

export interface ChartSeries {
  label: string;
  /** One value per time of `t`; null where there is no sample. */
  values: (number | null)[];
}

/** Distinguishable on the light background and in grey scale (solid, dashed, dotted, long-dashed). */
const COLORS = ['#1f5fbf', '#b3541e', '#2e7d32', '#7b1fa2', '#00838f', '#6d4c41'];
const DASHES: number[][] = [[], [6, 4], [2, 3], [10, 4]];
const TABLE_ROWS = 48;

const timeFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'short', timeStyle: 'short' });

/** Every `step`-th point so the table stays readable, with the last point always in. */
function sampleRows(count: number): number[] {
  if (count <= TABLE_ROWS) return [...Array(count).keys()];
  const step = Math.ceil(count / TABLE_ROWS);
  const rows = [];
  for (let i = 0; i < count; i += step) rows.push(i);
  if (rows[rows.length - 1] !== count - 1) rows.push(count - 1);
  return rows;
}

function stats(values: (number | null)[]): { latest: number | null; min: number | null; max: number | null } {
  const present = values.filter((v): v is number => v !== null);
  if (present.length === 0) return { latest: null, min: null, max: null };
  let latest: number | null = null;
  for (let i = values.length - 1; i >= 0 && latest === null; i--) latest = values[i] ?? null;
  return { latest, min: Math.min(...present), max: Math.max(...present) };
}

/**
 * A time-series chart (uPlot on a canvas) with what a screen reader or a reader without the
 * picture needs beside it: a summary sentence per series (latest, lowest, highest) and a table of
 * the values. `t` is unix seconds; `format` renders a value with its unit.
 */
export function TimeChart({
  title,
  t,
  series,
  format,
  span,
  height = 180,
}: {
  title: string;
  t: number[];
  series: ChartSeries[];
  format: (value: number) => string;
  /** The time axis' bounds (unix seconds), so a few points sit where they are in the range rather than spread over years. */
  span?: { from: number; to: number };
  height?: number;
}) {
  const box = useRef<HTMLDivElement>(null);
  const id = useId();
  useEffect(() => {
    const el = box.current;
    if (!el || t.length === 0) return;
    const width = Math.max(el.clientWidth, 280);
    const plot = new uPlot(
      {
        width,
        height,
        // The legend is ours (below): uPlot's writes inline style attributes the CSP refuses.
        legend: { show: false },
        cursor: { show: true, drag: { x: false, y: false } },
        scales: { x: span ? { time: true, range: [span.from, span.to] } : { time: true } },
        axes: [{}, { values: (_u, ticks) => ticks.map(format), size: 70 }],
        series: [{}, ...series.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: 2, dash: DASHES[i % DASHES.length], spanGaps: false }))],
      },
      [t, ...series.map((s) => s.values)] as uPlot.AlignedData,
      el,
    );
    const resize = new ResizeObserver(() => plot.setSize({ width: Math.max(el.clientWidth, 280), height }));
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [t, series, format, height, span?.from, span?.to]);

  const rows = sampleRows(t.length);
  const show = (v: number | null) => (v === null ? 'no data' : format(v));
  return (
    <figure className="chart" aria-labelledby={`${id}-title`}>
      <figcaption id={`${id}-title`} className="chart-title">
        {title}
      </figcaption>
      {t.length === 0 ? (
        <p className="muted">No samples in this range yet.</p>
      ) : (
        <>
          <div ref={box} className="chart-canvas" aria-hidden="true" />
          <ul className="chart-legend">
            {series.map((s, i) => {
              const st = stats(s.values);
              return (
                <li key={s.label}>
                  <span className={`chart-swatch chart-swatch-${i % COLORS.length}`} aria-hidden="true" />
                  {s.label}: latest {show(st.latest)}, lowest {show(st.min)}, highest {show(st.max)}
                </li>
              );
            })}
          </ul>
          <details className="chart-data">
            <summary>Values as a table{rows.length < t.length ? ` (${rows.length} of ${t.length} points)` : ''}</summary>
            <div className="table-wrap" tabIndex={0} role="region" aria-label={`${title}: values`}>
              <table>
                <caption className="visually-hidden">{title}: values</caption>
                <thead>
                  <tr>
                    <th scope="col">Time</th>
                    {series.map((s) => (
                      <th key={s.label} scope="col" className="num">
                        {s.label}
                      </th>
                    ))}
                  </tr>
                </thead>
                <tbody>
                  {rows.map((i) => (
                    <tr key={t[i]}>
                      <td>{timeFormat.format(new Date(t[i]! * 1000))}</td>
                      {series.map((s) => (
                        <td key={s.label} className="num">
                          {show(s.values[i] ?? null)}
                        </td>
                      ))}
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </details>
        </>
      )}
    </figure>
  );
}

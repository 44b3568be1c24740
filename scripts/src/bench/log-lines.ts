import type { LogLine } from '@gpufarm/shared';

/** The container waits this long before its first line, so every reader follows it from the start. */
export const LEAD_SECONDS = 3;

/**
 * A job's command that writes timestamped lines: after `LEAD_SECONDS`, `count` lines
 * `gfb <n> <seconds.micros>` paced at `rate` a second from busybox ash's `$EPOCHREALTIME` (no
 * fork per line): every ~2 ms it writes the lines that are due, each with its own write time.
 */
export function writerScript(rate: number, count: number): string {
  return [
    `sleep ${LEAD_SECONDS}`,
    't=$EPOCHREALTIME; t0=${t%.*}${t#*.}; i=0',
    `while [ $i -lt ${count} ]; do`,
    `  t=$EPOCHREALTIME; due=$(( (\${t%.*}\${t#*.} - t0) * ${rate} / 1000000 ))`,
    `  [ $due -gt ${count} ] && due=${count}`,
    '  while [ $i -lt $due ]; do echo "gfb $i $EPOCHREALTIME"; i=$((i+1)); done',
    '  usleep 2000',
    'done',
  ].join('\n');
}

const LINE = /^gfb (\d+) (\d+)\.(\d{6})$/;
/** Wall-clock milliseconds with sub-millisecond precision (the container writes microseconds). */
export const nowMs = () => performance.timeOrigin + performance.now();

/** What one reader saw of `writerScript`'s lines: per line number, the write time and the latency (ms). */
export class Reader {
  readonly writtenMs = new Map<number, number>();
  readonly latencyMs = new Map<number, number>();
  duplicates = 0;
  /** Records a line read at `readMs` (ms since the epoch, this machine's clock); other text is ignored. */
  take(text: string, readMs: number): void {
    const m = LINE.exec(text);
    if (!m) return;
    const n = Number(m[1]);
    if (this.latencyMs.has(n)) {
      this.duplicates += 1;
      return;
    }
    const written = Number(m[2]) * 1000 + Number(m[3]) / 1000;
    this.writtenMs.set(n, written);
    this.latencyMs.set(n, readMs - written);
  }
}

export interface Figures {
  lines: number;
  ratePerSecond: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

/** The latency percentiles of what a reader saw, and the rate the lines were written at. */
export function figures(reader: Reader): Figures {
  const lat = [...reader.latencyMs.values()].sort((a, b) => a - b);
  const at = (q: number) => (lat.length === 0 ? NaN : lat[Math.min(lat.length - 1, Math.ceil(q * lat.length) - 1)]!);
  const written = [...reader.writtenMs.values()];
  const span = (Math.max(...written) - Math.min(...written)) / 1000;
  return { lines: lat.length, ratePerSecond: span > 0 ? (lat.length - 1) / span : 0, p50: at(0.5), p95: at(0.95), p99: at(0.99), max: lat.at(-1) ?? NaN };
}

/** One table row's latency cells: `seen/count`, lines/s, p50, p95, p99, max. */
export function figureCells(f: Figures, count: number): string[] {
  const ms = (x: number) => x.toFixed(0);
  return [`${f.lines}/${count}`, f.ratePerSecond.toFixed(0), ms(f.p50), ms(f.p95), ms(f.p99), ms(f.max)];
}

/**
 * Follows a job's log as Server-Sent Events (`GET …/logs/stream`), stamping each line as its
 * event arrives; returns at the stream's `end` event.
 */
export async function followStream(url: string, apiKey: string, reader: Pick<Reader, 'take'>): Promise<void> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${apiKey}`, accept: 'text/event-stream' } });
  if (res.status !== 200 || !res.body) throw new Error(`GET logs/stream answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of res.body) {
    const readMs = nowMs();
    buffered += decoder.decode(chunk, { stream: true });
    for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      let type = 'message';
      let data = '';
      for (const field of event.split('\n')) {
        if (field.startsWith('event:')) type = field.slice(6).trim();
        else if (field.startsWith('data:')) data += field.slice(5).trimStart();
      }
      if (type === 'log') reader.take((JSON.parse(data) as LogLine).line, readMs);
      if (type === 'end') return;
    }
  }
}

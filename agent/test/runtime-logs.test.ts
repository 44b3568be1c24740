import t from 'tap';
import { MAX_LOG_LINE_CHARS } from '@gpufarm/shared';
import { compareCursors, DockerLogParser, formatCursor, linesAfter, parseCursor, sinceSeconds, splitLong, STREAM_SKEW_SECONDS, type LogCursor } from '../src/docker/log-lines.js';
import { busyboxSpec, collectLines, testRuntime } from './helpers/docker.js';

function frame(stream: 1 | 2, text: string): Buffer {
  const body = Buffer.from(text);
  const head = Buffer.alloc(8);
  head[0] = stream;
  head.writeUInt32BE(body.length, 4);
  return Buffer.concat([head, body]);
}

t.test('behavior: the parser joins frames split anywhere, pieces of long lines, and skips up to a cursor', async (t) => {
  const ts1 = '2026-11-22T10:00:00.000000001Z';
  const ts2 = '2026-11-22T10:00:00.000000002Z';
  const bytes = Buffer.concat([
    frame(1, `${ts1} one\n`),
    frame(2, `${ts1} two\n`),
    frame(1, `${ts2} long-a`),
    frame(1, `${ts2} long-b\n`),
    frame(2, `${ts2} tail`),
  ]);
  const got: Array<[string, string, string]> = [];
  const parser = new DockerLogParser((s, text, c) => got.push([s, text, formatCursor(c)]));
  for (let i = 0; i < bytes.length; i += 3) parser.push(bytes.subarray(i, i + 3));
  parser.end();
  t.same(got, [
    ['stdout', 'one', `${ts1}#0`],
    ['stderr', 'two', `${ts1}#1`],
    ['stdout', 'long-along-b', `${ts2}#1`],
    ['stderr', 'tail', `${ts2}#2`],
  ]);
  const after: LogCursor = parseCursor(`${ts1}#1`);
  const resumed: string[] = [];
  const p2 = new DockerLogParser((_s, text) => resumed.push(text), after);
  p2.push(bytes);
  p2.end();
  t.same(resumed, ['long-along-b', 'tail']);
});

t.test('behavior: a cursor is a place in Docker\'s order, not in time: a resumed parser emits each line after it once', async (t) => {
  // Docker stamps stdout and stderr in one goroutine each and stores them under one lock, so
  // across the streams the stored order can differ from the stamps' (err-1 stamped after out-1,
  // stored before it; seen on dockerd 20.10 with `echo out-$i; echo err-$i >&2`). out-1 is the
  // last line stored and it straddles a second with err-1.
  const bytes = Buffer.concat([
    frame(1, '2026-11-22T10:00:00.500000000Z out-0\n'),
    frame(2, '2026-11-22T10:00:00.600000000Z err-0\n'),
    frame(2, '2026-11-22T10:00:01.000000200Z err-1\n'),
    frame(1, '2026-11-22T10:00:00.999999900Z out-1\n'),
  ]);
  const read = (after: LogCursor | null) => {
    const got: Array<{ text: string; cursor: LogCursor }> = [];
    const parser = new DockerLogParser((_s, text, cursor) => got.push({ text, cursor }), after);
    parser.push(bytes);
    parser.end();
    return got;
  };
  const all = read(null);
  t.same(all.map((l) => l.text), ['out-0', 'err-0', 'err-1', 'out-1']);
  // The catch-up after the follower: it resumes after the follower's last line, out-1.
  t.same(read(all[3]!.cursor).map((l) => l.text), [], 'after the last line stored nothing comes again (err-1 is stamped later but was stored before)');
  // A restart after err-1 was delivered and before out-1 was.
  t.same(read(all[2]!.cursor).map((l) => l.text), ['out-1'], 'a line stored after the cursor\'s with an earlier stamp is not skipped');
  t.ok(sinceSeconds(all[2]!.cursor) <= Math.floor(Date.parse('2026-11-22T10:00:00Z') / 1000), 'and Docker is asked from early enough to return it');
});

t.test('args: cursors', async (t) => {
  const a = parseCursor('2026-11-22T10:00:01.500000000Z#2');
  t.equal(formatCursor(a), '2026-11-22T10:00:01.500000000Z#2');
  t.equal(sinceSeconds(a), Date.parse('2026-11-22T10:00:01Z') / 1000 - STREAM_SKEW_SECONDS, 'whole seconds, reaching back the skew between the streams');
  t.ok(compareCursors(a, parseCursor('2026-11-22T10:00:01.500000000Z#3')) < 0);
  t.ok(compareCursors(a, parseCursor('2026-11-22T10:00:01.400000000Z#9')) > 0);
  t.throws(() => parseCursor('yesterday#1'));
  t.same(splitLong('x'.repeat(MAX_LOG_LINE_CHARS * 2 + 1)).map((p) => p.length), [MAX_LOG_LINE_CHARS, MAX_LOG_LINE_CHARS, 1]);
});

t.test('args: linesAfter drops every piece of the cursor\'s line and ends the skipping past the skew when that line is gone', async (t) => {
  const c = (text: string) => parseCursor(text);
  const after = c('2026-11-22T10:00:01.000000000Z#0');
  const admits = linesAfter(after);
  const seen = ['2026-11-22T10:00:01.500000000Z#0', '2026-11-22T10:00:01.000000000Z#0', '2026-11-22T10:00:01.000000000Z#0', '2026-11-22T10:00:00.900000000Z#0', '2026-11-22T10:00:00.900000000Z#0'].map((x) => admits(c(x)));
  t.same(seen, [false, false, false, true, true], 'a later stamp before the line, both pieces of the line, then the pieces of the next line');
  const rotated = linesAfter(after);
  const gone = ['2026-11-22T10:00:01.900000000Z#0', '2026-11-22T10:00:02.100000000Z#0', '2026-11-22T10:00:01.200000000Z#0'].map((x) => rotated(c(x)));
  t.same(gone, [false, true, true], 'the cursor\'s line never comes: a line stamped more than the skew after it ends the skipping');
  t.equal(linesAfter(after)(c('2026-11-22T10:00:01.000000000Z#1')), true, 'the same stamp with a higher index is a later piece of the cursor\'s line');
  t.equal(linesAfter(null)(after), true);
});

t.test('behavior: stdout and stderr lines arrive in order with their streams', async (t) => {
  const runtime = testRuntime(t);
  const { lines, sink, of } = collectLines();
  // Back to back, then 100 ms apart: within a stream order always holds; across the two pipes
  // Docker orders lines as it reads them (checked below).
  const APART = 10;
  const script = 'i=0; while [ $i -lt 50 ]; do echo out-$i; echo err-$i >&2; i=$((i+1)); done; ' +
    `i=0; while [ $i -lt ${APART} ]; do echo apart-out-$i; usleep 100000; echo apart-err-$i >&2; usleep 100000; i=$((i+1)); done; printf "no-newline"`;
  const job = await runtime.start(busyboxSpec({ command: ['sh', '-c', script] }), sink);
  const exit = await job.done;
  t.equal(exit.exitCode, 0);
  const range = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => f(i));
  t.same(of('stdout'), [...range(50, (i) => `out-${i}`), ...range(APART, (i) => `apart-out-${i}`), 'no-newline'], 'stdout complete and in order, the last line without its newline');
  t.same(of('stderr'), [...range(50, (i) => `err-${i}`), ...range(APART, (i) => `apart-err-${i}`)], 'stderr complete and in order');
  // Across the two pipes the order is dockerd's: it reads each in its own goroutine, so on a
  // loaded machine a read can lag a write 100 ms later on the other pipe (seen in a CI run: one
  // pair swapped). What the agent must keep is that interleaving, not group lines by stream:
  // written alternately, they switch stream at almost every line (19 switches for 10 pairs; a
  // lagging read costs at most two).
  const apart = lines.filter((l) => l.line.startsWith('apart-'));
  const switches = apart.filter((l, i) => i > 0 && l.stream !== apart[i - 1]!.stream).length;
  t.ok(switches >= APART, `the two streams interleave as written, not grouped by stream (${switches} switches of stream among ${apart.length} lines: ${apart.map((l) => l.line).join(' ')})`);
  t.ok(lines.every((l) => Number.isInteger(l.ts) && l.ts > 0));
  t.ok(lines.filter((l) => l.stream !== 'system').every((l) => l.cursor !== null));
  t.match(of('system').at(-1), /^exited with code 0/);
});

t.test('behavior: a line longer than the protocol allows arrives in pieces', async (t) => {
  const runtime = testRuntime(t);
  const { sink, of } = collectLines();
  const job = await runtime.start(busyboxSpec({ command: ['sh', '-c', `head -c ${MAX_LOG_LINE_CHARS * 3} /dev/zero | tr '\\0' x; echo; echo after`] }), sink);
  await job.done;
  const out = of('stdout');
  t.same(out.map((l) => l.length), [MAX_LOG_LINE_CHARS, MAX_LOG_LINE_CHARS, MAX_LOG_LINE_CHARS, 5]);
  t.equal(out.at(-1), 'after');
});

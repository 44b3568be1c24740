import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { LogFile, replayFiles, writeLogArtifact } from '../src/runtime/log-file.js';
import type { RuntimeLogLine } from '../src/docker/log-lines.js';

function folder(t: { teardown: (fn: () => void) => void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'gf-log-file-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const line = (i: number): RuntimeLogLine => ({ stream: 'stdout', line: `line-${i} ${'x'.repeat(80)}`, ts: 1_700_000_000_000 + i, cursor: `2026-11-22T15:37:22.${String(i).padStart(9, '0')}Z#0` });
const parse = (text: string) => text.trimEnd().split('\n').map((l) => JSON.parse(l) as { stream: string; line: string; cursor: string | null });
const numberOf = (l: { line: string }) => Number(/^line-(\d+) /.exec(l.line)?.[1] ?? -1);
const diskBytes = (dir: string) => readdirSync(dir).reduce((n, name) => n + statSync(join(dir, name)).size, 0);

t.test('default: a log under the cap is its own artifact, line for line', async (t) => {
  const dir = folder(t);
  const path = join(dir, 'log.jsonl');
  const { file } = await LogFile.open(path, 4096);
  for (let i = 0; i < 10; i++) file.append(line(i));
  await file.close();
  t.equal(await writeLogArtifact(path, 4096), path);
  t.same(parse(readFileSync(path, 'utf8')).map(numberOf), Array.from({ length: 10 }, (_, i) => i));
  t.same(replayFiles(path), [{ path, firstSeq: 0 }]);
});

t.test('behavior: past the cap the disk holds the head and about the last keepBytes; the artifact is the head, one system line and the last keepBytes', async (t) => {
  const dir = folder(t);
  const path = join(dir, 'log.jsonl');
  const keep = 4096;
  const { file } = await LogFile.open(path, keep);
  let most = 0;
  for (let i = 0; i < 2000; i++) {
    file.append(line(i));
    most = Math.max(most, diskBytes(dir));
  }
  await file.close();
  t.ok(most <= keep + keep + keep / 4 + 200, `the files never held much more than both ends (${most} bytes at most)`);

  const artifact = await writeLogArtifact(path, keep);
  t.not(artifact, path);
  const bytes = readFileSync(artifact);
  t.ok(bytes.length <= 2 * keep + 300, `${bytes.length} bytes`);
  const lines = parse(bytes.toString('utf8'));
  const cut = lines.findIndex((l) => l.stream === 'system');
  const head = lines.slice(0, cut).map(numberOf);
  const tail = lines.slice(cut + 1).map(numberOf);
  t.same(head, Array.from({ length: head.length }, (_, i) => i), 'the head from the first line');
  t.same(tail, Array.from({ length: tail.length }, (_, i) => 2000 - tail.length + i), 'the tail up to the last line');
  const m = /^log cut: (\d+) lines \((\d+) bytes\) were dropped here/.exec(lines[cut]!.line);
  t.ok(m, lines[cut]!.line);
  t.equal(Number(m![1]), 2000 - head.length - tail.length, 'the dropped lines are counted');
  const bytesOf = (i: number) => Buffer.byteLength(`${JSON.stringify(line(i), ['ts', 'stream', 'line', 'cursor'])}\n`);
  const dropped = Array.from({ length: Number(m![1]) }, (_, i) => bytesOf(head.length + i)).reduce((a, b) => a + b, 0);
  t.equal(Number(m![2]), dropped, 'and their bytes');
  t.same(readFileSync(await writeLogArtifact(path, keep)), bytes, 'written again, the same bytes');
});

t.test('behavior: reopened after a restart, numbering and the cut go on where they were; a cut log replays from its first kept line at its seq', async (t) => {
  const dir = folder(t);
  const path = join(dir, 'log.jsonl');
  const keep = 4096;
  const first = await LogFile.open(path, keep);
  for (let i = 0; i < 300; i++) first.file.append(line(i));
  await first.file.close();
  const again = await LogFile.open(path, keep);
  t.equal(again.last && `${again.last.ts}#${again.last.index}`, line(299).cursor, 'the last cursor comes from the newest segment');
  for (let i = 300; i < 600; i++) again.file.append(line(i));
  await again.file.close();

  const files = replayFiles(path);
  t.ok(files.length >= 1 && files.every((f) => f.path !== path), 'the head is not replayed once the middle is gone');
  let seq = files[0]!.firstSeq;
  for (const f of files) {
    t.equal(f.firstSeq, seq, `${f.path} starts at seq ${seq}`);
    const nums = parse(readFileSync(f.path, 'utf8')).map(numberOf);
    t.same(nums, Array.from({ length: nums.length }, (_, i) => seq + i), 'its lines are the lines of those seqs');
    seq += nums.length;
  }
  t.equal(seq, 600, 'up to the last line');

  const lines = parse(readFileSync(await writeLogArtifact(path, keep), 'utf8'));
  const nums = lines.filter((l) => l.stream === 'stdout').map(numberOf);
  t.equal(nums.at(-1), 599);
  const m = /(\d+) lines/.exec(lines.find((l) => l.stream === 'system')!.line);
  t.equal(Number(m![1]), 600 - nums.length);
});

t.test('behavior: a log past its head that dropped nothing is replayed from seq 0 and uploaded whole', async (t) => {
  const dir = folder(t);
  const path = join(dir, 'log.jsonl');
  const { file } = await LogFile.open(path, 4096);
  for (let i = 0; i < 30; i++) file.append(line(i));
  await file.close();
  const files = replayFiles(path);
  t.ok(files.length > 1, 'a segment past the head');
  t.equal(files[0]!.path, path);
  t.equal(files[0]!.firstSeq, 0);
  const all = files.flatMap((f) => parse(readFileSync(f.path, 'utf8')).map(numberOf));
  t.same(all, Array.from({ length: 30 }, (_, i) => i));
  const artifact = parse(readFileSync(await writeLogArtifact(path, 4096), 'utf8'));
  t.same(artifact.map(numberOf), all, 'the artifact is the whole log, without a note');
});

t.test('behavior: reopened when the newest segment holds only system lines, the last container cursor comes from an older file', async (t) => {
  const dir = folder(t);
  const path = join(dir, 'log.jsonl');
  const keep = 4096;
  const first = await LogFile.open(path, keep);
  for (let i = 0; i < 40; i++) first.file.append(line(i));
  for (let i = 0; i < 20; i++) first.file.append({ stream: 'system', line: `note ${i} ${'y'.repeat(60)}`, ts: 0, cursor: null });
  await first.file.close();
  t.ok(replayFiles(path).length > 1);
  const again = await LogFile.open(path, keep);
  await again.file.close();
  t.equal(again.last && `${again.last.ts}#${again.last.index}`, line(39).cursor);
});

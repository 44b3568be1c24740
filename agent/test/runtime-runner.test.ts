import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { AssignmentContext, AssignmentReport } from '../src/link/assignment-runner.js';
import { DockerAssignmentRunner } from '../src/runner/docker-runner.js';
import { canaryResult, verifyRecord } from '@gpufarm/shared/node';
import { busyboxSpec, localImages, testRuntime, uniqueName, uploadSink } from './helpers/docker.js';

const keys = generateKeyPairSync('ed25519');

/**
 * Stands in for the daemon's side of the port: each context numbers lines from its first seq
 * like the shipper, and a "server" keeps each (assignment, seq) once, checking that a seq sent
 * again carries the same text.
 */
function fakeDaemon() {
  const stored = new Map<number, { stream: string; line: string }>();
  const conflicts: string[] = [];
  const reports: AssignmentReport[] = [];
  const open = (assignmentId: string, firstSeq = 0): AssignmentContext => {
    let next = firstSeq;
    return {
      assignmentId,
      logs: {
        assignmentId,
        write: (stream, line) => {
          const seq = next++;
          const had = stored.get(seq);
          if (had && (had.line !== line || had.stream !== stream)) conflicts.push(`seq ${seq}: ${had.line} / ${line}`);
          if (!had) stored.set(seq, { stream, line });
          return seq;
        },
        get nextSeq() {
          return next;
        },
        drained: async () => undefined,
        release: () => undefined,
      },
      report: (status) => reports.push(status),
      partitioned: false,
    };
  };
  const lines = () => [...stored.entries()].sort(([a], [b]) => a - b);
  const finished = () => reports.find((r) => r.state === 'finished' || r.state === 'failed');
  return { open, stored, conflicts, reports, lines, finished };
}

async function until<T>(get: () => T | undefined, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = get();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 25));
  }
}

t.test('behavior: an assignment goes from accept to finished with outputs and a signed record', async (t) => {
  const runtime = testRuntime(t);
  const upload = await uploadSink(t);
  const runner = new DockerAssignmentRunner({ runtime, uploadUrl: (id, name) => `${upload.url}/agent/v1/assignments/${id}/outputs/${name}`, uploadHeaders: () => ({ authorization: 'Bearer gfa_x' }), machineKey: keys.privateKey });
  const images = localImages();
  const spec = busyboxSpec({ image: images.canary.repository, imageDigest: images.canary.digest, command: ['sha256-chain', '77'] });
  const daemon = fakeDaemon();
  t.same(await runner.accept(spec, daemon.open(spec.assignmentId)), { accepted: true });
  t.match(await runner.accept(spec, daemon.open(spec.assignmentId)), { accepted: false, reason: 'duplicate' });
  const done = await until(daemon.finished);
  t.equal(done.state, 'finished');
  // `pulling` only when the image was not on the machine yet, before `starting`.
  t.same(daemon.reports.map((r) => r.state).filter((s) => s !== 'pulling'), ['starting', 'running', 'exited', 'uploading', 'finished']);
  t.ok(daemon.reports.findIndex((r) => r.state === 'pulling') <= 0, 'a pull, when there is one, is reported first');
  t.equal(done.exitCode, 0);
  t.equal(done.imageDigest, images.canary.digest);
  t.equal(done.outputs!.length, 1);
  t.equal(done.lastLogSeq, daemon.stored.size - 1);
  const record = verifyRecord(done.record!, keys.publicKey);
  t.ok(record);
  t.equal(record!.outputs[0]!.sha256, done.outputs![0]!.sha256);
  const tar = upload.received.find((u) => u.path.endsWith('/output-0'))!.body;
  t.ok(tar.includes(Buffer.from(canaryResult(spec.jobId, 77))), 'the uploaded tar holds the canary result');
  let state: unknown = 'pending';
  await until(() => (state === null ? true : void runtime.readState(spec.assignmentId).then((s) => (state = s))));
  t.pass('released after upload');
});

t.test('error: refusals name the reason', async (t) => {
  const runtime = testRuntime(t);
  const runner = new DockerAssignmentRunner({ runtime, uploadUrl: () => 'http://127.0.0.1:1/x', uploadHeaders: () => ({}), machineKey: keys.privateKey });
  const daemon = fakeDaemon();
  t.match(await runner.accept(busyboxSpec({ networkPolicy: { mode: 'allowlist', allow: ['pypi.org'] } }), daemon.open('a')), { accepted: false, reason: 'unsupported' });
  t.match(await runner.accept(busyboxSpec({ env: { GF_X: '1' } }), daemon.open('b')), { accepted: false, reason: 'invalid' });
  const spec = busyboxSpec({ imageDigest: `sha256:${'0'.repeat(64)}` });
  t.same(await runner.accept(spec, daemon.open(spec.assignmentId)), { accepted: true });
  const failed = await until(daemon.finished);
  t.equal(failed.state, 'failed');
  t.equal(failed.failure!.code, 'pull_failed');
});

t.test('behavior: the agent stops mid-job and a new one restores it: the job runs once, every line once, in order, and its result is reported', async (t) => {
  const owner = uniqueName('t');
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-runtime-'));
  const upload = await uploadSink(t);
  const options = { uploadUrl: (id: string, name: string) => `${upload.url}/${id}/${name}`, uploadHeaders: () => ({}), machineKey: keys.privateKey };
  const daemon = fakeDaemon();
  const first = new DockerAssignmentRunner({ runtime: testRuntime(t, { owner, stateDir }), ...options });
  const script = 'i=0; while [ $i -lt 30 ]; do echo line-$i; i=$((i+1)); usleep 50000; done; echo ran-once >> /output/runs.txt';
  const spec = busyboxSpec({ command: ['sh', '-c', script] });
  await first.accept(spec, daemon.open(spec.assignmentId));
  await until(() => ([...daemon.stored.values()].filter((l) => l.stream === 'stdout').length >= 8 ? true : undefined));
  await first.close();
  t.same((await first.running()).length, 0);

  const second = new DockerAssignmentRunner({ runtime: testRuntime(t, { owner, stateDir }), ...options });
  await second.restore((id, firstSeq) => daemon.open(id, firstSeq));
  const held = await second.running();
  t.equal(held.length, 1);
  t.equal(held[0]!.assignmentId, spec.assignmentId);
  const done = await until(daemon.finished);
  t.equal(done.state, 'finished');
  t.equal(done.exitCode, 0);
  t.same(daemon.conflicts, [], 'a seq sent again carries the same line');
  const seqs = daemon.lines().map(([seq]) => seq);
  t.same(seqs, Array.from({ length: seqs.length }, (_, i) => i), 'seqs have no gap');
  const stdout = daemon.lines().filter(([, l]) => l.stream === 'stdout').map(([, l]) => l.line);
  t.same(stdout, Array.from({ length: 30 }, (_, i) => `line-${i}`), 'every line exactly once, in order');
  const tar = upload.received.find((u) => u.path.endsWith('/output-0'))!.body.toString('latin1');
  t.equal(tar.split('ran-once').length - 1, 1, 'the job ran once');
});

t.test('behavior: a job that writes far more log than the artifact keeps finishes with its first and last part and a system line saying what was dropped; every line still goes to the sink', async (t) => {
  const keep = 64 * 1024;
  const runtime = testRuntime(t, { logKeepBytes: keep });
  // The control plane refuses a log over its limit (413): the artifact must always fit it.
  const upload = await uploadSink(t, { maxBytes: 4 * keep });
  const runner = new DockerAssignmentRunner({ runtime, uploadUrl: (id, name) => `${upload.url}/${id}/${name}`, uploadHeaders: () => ({}), machineKey: keys.privateKey });
  const count = 20_000;
  const pad = 'x'.repeat(150);
  const spec = busyboxSpec({ command: ['sh', '-c', `i=0; while [ $i -lt ${count} ]; do echo "line-$i ${pad}"; i=$((i+1)); done`] });
  const daemon = fakeDaemon();
  await runner.accept(spec, daemon.open(spec.assignmentId));
  const done = await until(daemon.finished, 120_000);
  t.equal(done.state, 'finished', `finished, not ${done.state} (${done.failure?.message ?? ''})`);
  t.equal(done.exitCode, 0);

  const stdout = daemon.lines().filter(([, l]) => l.stream === 'stdout').map(([, l]) => l.line);
  t.equal(stdout.length, count, 'the sink (the live log) got every line');

  const body = upload.received.find((u) => u.path.endsWith('/log'))!.body;
  t.ok(body.length <= 2 * keep + 1024, `the artifact keeps at most ${keep} bytes at each end (${body.length} bytes)`);
  t.equal(done.log?.sizeBytes, body.length);
  const lines = body.toString('utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as { stream: string; line: string });
  const numbers = lines.filter((l) => l.stream === 'stdout').map((l) => Number(/^line-(\d+) /.exec(l.line)![1]));
  const cut = lines.findIndex((l) => l.stream === 'system' && l.line.startsWith('log cut:'));
  t.ok(cut > 0, 'one system line marks the cut');
  t.equal(lines.filter((l) => l.line.startsWith('log cut:')).length, 1);
  const before = lines.slice(0, cut).filter((l) => l.stream === 'stdout').length;
  t.same(numbers.slice(0, before), Array.from({ length: before }, (_, i) => i), 'the first part, in order');
  const after = numbers.slice(before);
  t.equal(after.at(-1), count - 1, 'the last part ends with the last line');
  t.same(after, Array.from({ length: after.length }, (_, i) => count - after.length + i), 'the last part, in order');
  const [, droppedLines, droppedBytes] = /(\d+) lines \((\d+) bytes\) were dropped/.exec(lines[cut]!.line) ?? [];
  t.equal(Number(droppedLines), count - numbers.length, 'the line says how many lines were dropped');
  t.ok(Number(droppedBytes) > count * 100, `and how many bytes (${droppedBytes})`);
  t.match(lines.at(-1)!.line, /^exited with code 0/, "the agent's last line is kept");
});

t.test('behavior: an agent restarted after its job log was cut goes on with the same numbering: every line once under one seq, and the artifact ends with the last line', async (t) => {
  const owner = uniqueName('t');
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-runtime-'));
  const upload = await uploadSink(t);
  const options = { uploadUrl: (id: string, name: string) => `${upload.url}/${id}/${name}`, uploadHeaders: () => ({}), machineKey: keys.privateKey };
  const keep = 16 * 1024;
  const daemon = fakeDaemon();
  const first = new DockerAssignmentRunner({ runtime: testRuntime(t, { owner, stateDir, logKeepBytes: keep }), ...options });
  const count = 400;
  const spec = busyboxSpec({ command: ['sh', '-c', `i=0; while [ $i -lt ${count} ]; do echo "line-$i ${'x'.repeat(150)}"; i=$((i+1)); usleep 10000; done`] });
  await first.accept(spec, daemon.open(spec.assignmentId));
  // Past the first 16 KiB and a few tail segments, so the middle is gone before the restart.
  await until(() => ([...daemon.stored.values()].filter((l) => l.stream === 'stdout').length >= 250 ? true : undefined));
  await first.close();

  const second = new DockerAssignmentRunner({ runtime: testRuntime(t, { owner, stateDir, logKeepBytes: keep }), ...options });
  await second.restore((id, firstSeq) => daemon.open(id, firstSeq));
  const done = await until(daemon.finished);
  t.equal(done.state, 'finished');
  t.same(daemon.conflicts, [], 'a seq sent again carries the same line');
  const seqs = daemon.lines().map(([seq]) => seq);
  t.same(seqs, Array.from({ length: seqs.length }, (_, i) => i), 'seqs have no gap');
  const stdout = daemon.lines().filter(([, l]) => l.stream === 'stdout').map(([, l]) => Number(/^line-(\d+) /.exec(l.line)![1]));
  t.same(stdout, Array.from({ length: count }, (_, i) => i), 'every line exactly once, in order');
  const log = upload.received.find((u) => u.path.endsWith('/log'))!.body.toString('utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as { stream: string; line: string });
  t.equal(log.filter((l) => l.line.startsWith('log cut:')).length, 1, 'one cut line');
  t.match(log.filter((l) => l.stream === 'stdout').at(-1)!.line, new RegExp(`^line-${count - 1} `));
});

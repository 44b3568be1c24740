import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { DetachedError } from '../src/runtime/docker-runtime.js';
import { assignmentLabels } from '../src/docker/labels.js';
import { isMountPoint } from '../src/runtime/output-mount.js';
import type { RuntimeLogLine } from '../src/docker/log-lines.js';
import { restoreJobs } from '../src/restore/restore.js';
import { busyboxSpec, collectLines, docker, localImages, testRuntime, uniqueName } from './helpers/docker.js';

const COUNT = 40;
const counting = `i=0; while [ $i -lt ${COUNT} ]; do echo line-$i; echo err-$i >&2; i=$((i+1)); usleep 50000; done`;
const expected = (prefix: string) => Array.from({ length: COUNT }, (_, i) => `${prefix}-${i}`);
const containerLines = (lines: RuntimeLogLine[], stream: string) => lines.filter((l) => l.stream === stream).map((l) => l.line);

async function waitFor(check: () => boolean, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
}

t.test('behavior: a new runtime finds a running container and its lines continue after the spool\'s last one, without duplicates', async (t) => {
  const owner = uniqueName('t');
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-runtime-'));
  const first = testRuntime(t, { owner, stateDir });
  const before = collectLines();
  const spec = busyboxSpec({ command: ['sh', '-c', counting] });
  const job = await first.start(spec, before.sink);
  await waitFor(() => before.of('stdout').length >= 8);
  // The agent goes away without touching the container.
  await job.detach();
  await t.rejects(job.done, DetachedError);
  const spooled = before.lines.filter((l) => l.cursor !== null);
  const lastCursor = spooled.at(-1)!.cursor;
  t.ok(before.of('stdout').length < COUNT, 'stopped mid-job');

  const second = testRuntime(t, { owner, stateDir });
  const after = collectLines();
  const restored = await restoreJobs(second, { sinkFor: () => after.sink, cursorFor: () => lastCursor });
  t.equal(restored.jobs.length, 1);
  t.same(restored.removed, []);
  const exit = await restored.jobs[0]!.done;
  t.equal(exit.exitCode, 0);
  const all = [...spooled, ...after.lines];
  t.same(containerLines(all, 'stdout'), expected('line'), 'every stdout line exactly once, in order');
  t.same(containerLines(all, 'stderr'), expected('err'), 'every stderr line exactly once, in order');
});

t.test('behavior: without a cursor from the link, the follower resumes after the log file\'s last line; the log artifact has no duplicates', async (t) => {
  const owner = uniqueName('t');
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-runtime-'));
  const first = testRuntime(t, { owner, stateDir });
  const before = collectLines();
  const job = await first.start(busyboxSpec({ command: ['sh', '-c', counting] }), before.sink);
  await waitFor(() => before.of('stdout').length >= 5);
  await job.detach();

  const second = testRuntime(t, { owner, stateDir });
  const after = collectLines();
  const restored = await restoreJobs(second, { sinkFor: () => after.sink });
  const resumed = restored.jobs[0]!;
  await resumed.done;
  const all = [...before.lines, ...after.lines].filter((l) => l.cursor !== null);
  t.same(containerLines(all, 'stdout'), expected('line'));
  const { readFile } = await import('node:fs/promises');
  const file = (await readFile(resumed.logFile, 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as RuntimeLogLine);
  t.same(containerLines(file, 'stdout'), expected('line'), 'the log artifact holds each line once');
});

t.test('behavior: a job that finished while the agent was down is reported with its exit code; unowned containers are removed; the mount goes on release', async (t) => {
  const owner = uniqueName('t');
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-runtime-'));
  const first = testRuntime(t, { owner, stateDir });
  const before = collectLines();
  const spec = busyboxSpec({ command: ['sh', '-c', 'echo a; usleep 300000; echo b; echo c > /output/c.txt; exit 3'] });
  const job = await first.start(spec, before.sink);
  await job.detach();
  await docker.getContainer(job.containerId).wait();

  // A container with this owner's labels that no assignment owns (its state is gone).
  const stray = await docker.createContainer({
    name: uniqueName('gf-stray'),
    Image: localImages().busybox.reference,
    Cmd: ['sleep', '60'],
    Labels: assignmentLabels(owner, 'asg_nobody', 'job_nobody', 60),
  });

  const second = testRuntime(t, { owner, stateDir });
  const after = collectLines();
  const restored = await restoreJobs(second, { sinkFor: () => after.sink });
  t.same(restored.removed, [stray.id], 'the stray container is removed');
  t.equal(restored.jobs.length, 1);
  const exit = await restored.jobs[0]!.done;
  t.equal(exit.exitCode, 3, 'the exit code of the run that ended while the agent was down');
  t.same(containerLines([...before.lines, ...after.lines], 'stdout'), ['a', 'b']);
  t.ok(existsSync(join(restored.jobs[0]!.outputDir, 'c.txt')), 'its outputs are there to collect');

  const dir = second.dirOf(spec.assignmentId);
  t.equal(await isMountPoint(join(dir, 'output')), true, 'the loop mount lives until release');
  await second.release(spec.assignmentId);
  t.equal(await isMountPoint(join(dir, 'output')), false, 'release unmounts');
  t.notOk(existsSync(dir), 'release deletes the folder');
  await t.rejects(docker.getContainer(job.containerId).inspect(), 'release removes the container');
});

t.test('behavior: restore re-arms maxRuntimeSeconds from the container start', async (t) => {
  const owner = uniqueName('t');
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-runtime-'));
  const first = testRuntime(t, { owner, stateDir, stopGraceSeconds: 1 });
  const job = await first.start(busyboxSpec({ maxRuntimeSeconds: 2, command: ['sleep', '60'] }), collectLines().sink);
  await job.detach();
  const second = testRuntime(t, { owner, stateDir, stopGraceSeconds: 1 });
  const restored = await restoreJobs(second, { sinkFor: () => collectLines().sink });
  const exit = await restored.jobs[0]!.done;
  t.equal(exit.timedOut, true);
});

t.test('behavior: a container created but never started is removed and reported lost, not run', async (t) => {
  const owner = uniqueName('t');
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-runtime-'));
  const first = testRuntime(t, { owner, stateDir });
  const spec = busyboxSpec({ command: ['sh', '-c', 'echo must-not-run'] });
  const job = await first.start(spec, collectLines().sink);
  await job.detach();
  await docker.getContainer(job.containerId).wait();
  // Stand-in for an agent that died between create and start: a created twin with the state's id.
  const twin = await docker.createContainer({
    name: uniqueName('gf-created'),
    Image: localImages().busybox.reference,
    Cmd: ['echo', 'must-not-run'],
    Labels: assignmentLabels(owner, spec.assignmentId, spec.jobId, 60),
  });
  await docker.getContainer(job.containerId).remove({ force: true });
  const { writeFile, readFile } = await import('node:fs/promises');
  const statePath = join(first.dirOf(spec.assignmentId), 'state.json');
  const state = JSON.parse(await readFile(statePath, 'utf8')) as { containerId: string };
  await writeFile(statePath, JSON.stringify({ ...state, containerId: twin.id }));
  await import('node:fs/promises').then((fs) => fs.rm(join(first.dirOf(spec.assignmentId), 'exit.json'), { force: true }));

  const second = testRuntime(t, { owner, stateDir });
  const restored = await restoreJobs(second, { sinkFor: () => collectLines().sink });
  t.same(restored.jobs, []);
  t.same(restored.removed, [twin.id]);
  t.same(restored.lost.map((s) => s.assignmentId), [spec.assignmentId]);
  await t.rejects(twin.inspect(), 'the created container is gone');
});

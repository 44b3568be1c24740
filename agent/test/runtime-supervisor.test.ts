import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import type { Test } from 'tap';
import t from 'tap';
import type { AssignmentSpec } from '@gpufarm/shared';
import { GpufarmError } from '@gpufarm/shared';
import { ContainerSupervisor, exitLine, exitRecord, logRoutes, remainingRuntimeMs, type ContainerSupervisorOptions } from '../src/runtime/container-supervisor.js';
import { DetachedError } from '../src/job/errors.js';
import type { JobExit, JobState } from '../src/job/state.js';
import { LogFile } from '../src/runtime/log-file.js';
import { DockerLogParser, formatCursor, type LogCursor } from '../src/docker/log-lines.js';
import { LABEL_MANAGED, LABEL_OWNER } from '../src/docker/labels.js';
import { busyboxSpec, collectLines, docker, localImages, uniqueName, waitFor } from './helpers/docker.js';

const at = (ts: string, index = 0): LogCursor => ({ ts, index });

function stateOf(spec: AssignmentSpec, over: Partial<JobState> = {}): JobState {
  return {
    spec,
    containerId: 'c',
    imageReference: localImages().busybox.reference,
    imageDigest: localImages().busybox.digest,
    outputMount: 'watchdog',
    outputLimitBytes: 1024,
    startedAt: new Date().toISOString(),
    ...over,
  };
}

t.test('default: remainingRuntimeMs counts maxRuntimeSeconds from the job\'s start', async (t) => {
  const spec = busyboxSpec({ maxRuntimeSeconds: 60 });
  const start = Date.parse('2025-01-01T00:00:00.000Z');
  const state = { spec, startedAt: new Date(start).toISOString() };
  t.equal(remainingRuntimeMs(state, start), 60_000, 'default: the whole limit at the start');
  t.equal(remainingRuntimeMs(state, start + 45_500), 14_500, 'a resumed job keeps the time it has left');
  t.equal(remainingRuntimeMs(state, start + 61_000), 0, 'a job past its limit is stopped at once');
});

t.test('behavior: logRoutes sends the file and the sink each the lines it lacks', async (t) => {
  const a = at('2025-01-01T00:00:01.000000000Z');
  const b = at('2025-01-01T00:00:02.000000000Z');
  const c = at('2025-01-01T00:00:03.000000000Z');

  const fresh = logRoutes(null, null);
  t.equal(fresh.resumeAt, null, 'default: a new job is followed from its first line');
  t.same([a, b, c].map(fresh.toFile), [true, true, true]);
  t.same([a, b, c].map(fresh.toSink), [true, true, true]);

  const same = logRoutes(b, b);
  t.same(same.resumeAt, b, 'args: file and spool at one line: the follower starts after it');
  t.same([c].map(same.toFile), [true], 'both take every line the follower reads');
  t.same([c].map(same.toSink), [true]);

  const behind = logRoutes(b, a);
  t.same(behind.resumeAt, a, 'args: the spool behind the file: the follower starts after the spool\'s line');
  t.same([b, c].map(behind.toSink), [true, true], 'the sink gets what the spool lacks');
  t.same([b, c].map(behind.toFile), [false, true], 'the file skips what it holds');
});

t.test('behavior: exitRecord says how a job ended and exitLine says it in words', async (t) => {
  const spec = busyboxSpec();
  const state = stateOf(spec);
  const now = Date.parse('2025-01-01T00:01:00.000Z');
  const finished = { OOMKilled: false, FinishedAt: '2025-01-01T00:00:59.000000000Z' };

  const ok = exitRecord({ state, exitCode: 0, info: finished, stopCause: null, now });
  t.same(ok, {
    assignmentId: spec.assignmentId,
    exitCode: 0,
    oomKilled: false,
    timedOut: false,
    canceled: false,
    outputLimitExceeded: false,
    startedAt: state.startedAt,
    finishedAt: finished.FinishedAt,
    imageDigest: state.imageDigest,
  }, 'default');
  t.equal(exitLine(ok), 'exited with code 0');

  const oom = exitRecord({ state, exitCode: 137, info: finished, stopCause: null, now });
  t.equal(oom.oomKilled, true, 'behavior: exit 137 the agent did not cause is out of memory');
  t.equal(exitLine(oom), 'exited with code 137 (out of memory)');
  t.equal(exitRecord({ state, exitCode: 0, info: { ...finished, OOMKilled: true }, stopCause: null, now }).oomKilled, true, 'Docker\'s OOMKilled counts');

  const timedOut = exitRecord({ state, exitCode: 137, info: finished, stopCause: 'timeout', now });
  t.same([timedOut.oomKilled, timedOut.timedOut], [false, true], 'behavior: a kill the agent caused is not out of memory');
  t.equal(exitLine(timedOut), 'exited with code 137 (stopped at maxRuntimeSeconds)');
  t.equal(exitLine(exitRecord({ state, exitCode: 143, info: finished, stopCause: 'cancel', now })), 'exited with code 143 (canceled)');
  t.equal(exitLine(exitRecord({ state, exitCode: 137, info: finished, stopCause: 'watchdog', now })), 'exited with code 137 (output limit exceeded)');

  const gone = exitRecord({ state, exitCode: null, info: null, stopCause: null, now });
  t.same([gone.exitCode, gone.finishedAt], [null, new Date(now).toISOString()], 'args: a container removed behind the agent\'s back finishes now, without a code');
  t.equal(exitRecord({ state, exitCode: 0, info: { OOMKilled: false, FinishedAt: '0001-01-01T00:00:00Z' }, stopCause: null, now }).finishedAt, new Date(now).toISOString(), 'Docker\'s zero time is no finish');
});

interface Supervised {
  supervisor: ContainerSupervisor;
  options: ContainerSupervisorOptions;
  lines: ReturnType<typeof collectLines>;
  logPath: string;
}

/** A busybox container of this test running `script` (started unless told otherwise), removed at teardown. */
async function container(t: Test, owner: string, script: string, start = true): Promise<Docker.Container> {
  const created = await docker.createContainer({
    name: uniqueName('gf-supervised'),
    Image: localImages().busybox.reference,
    Cmd: ['sh', '-c', script],
    Labels: { [LABEL_MANAGED]: 'true', [LABEL_OWNER]: owner },
    HostConfig: { NetworkMode: 'none' },
  });
  t.teardown(() => created.remove({ force: true }).catch(() => undefined));
  if (start) await created.start();
  return created;
}

/** A supervisor of `box` in a folder of its own, with a real log file; nothing is started. */
async function supervise(t: Test, box: Docker.Container, over: Partial<ContainerSupervisorOptions> & { spec?: AssignmentSpec } = {}): Promise<Supervised> {
  const dir = mkdtempSync(join(tmpdir(), 'gf-supervisor-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'output'));
  const logPath = join(dir, 'log.jsonl');
  const { file: log } = await LogFile.open(logPath);
  t.teardown(() => log.close().catch(() => undefined));
  const lines = collectLines();
  const { spec: given, ...rest } = over;
  const spec = given ?? busyboxSpec();
  const options: ContainerSupervisorOptions = {
    docker,
    owner: uniqueName('t'),
    dir,
    state: stateOf(spec, { containerId: box.id }),
    container: box,
    log,
    fileAfter: null,
    sink: lines.sink,
    exited: box.wait({ condition: 'not-running' }) as Promise<{ StatusCode: number }>,
    graceSeconds: 1,
    now: Date.now,
    ...rest,
  };
  options.exited.catch(() => undefined);
  return { supervisor: new ContainerSupervisor(options), options, lines, logPath };
}

async function running(box: Docker.Container): Promise<boolean> {
  return (await box.inspect()).State.Running;
}

t.test('behavior: armDeadline stops a job found past maxRuntimeSeconds at once', async (t) => {
  const owner = uniqueName('t');
  const box = await container(t, owner, 'sleep 60');
  const spec = busyboxSpec({ maxRuntimeSeconds: 60 });
  const { supervisor, lines } = await supervise(t, box, { spec, state: stateOf(spec, { containerId: box.id, startedAt: new Date(Date.now() - 61_000).toISOString() }) });
  supervisor.armDeadline();
  await waitFor(async () => !(await running(box)));
  t.equal(supervisor.stopCause, 'timeout', 'behavior: a job found past its limit is stopped at once');
  t.same(lines.of('system'), ['maxRuntimeSeconds (60) reached: stopping (SIGTERM, then SIGKILL after 1 s)']);
});

t.test('behavior: checkOutput stops a job whose /output passes its limit, without a grace period', async (t) => {
  const owner = uniqueName('t');
  const box = await container(t, owner, 'sleep 60');
  const spec = busyboxSpec();
  const { supervisor, options, lines } = await supervise(t, box, { spec, state: stateOf(spec, { containerId: box.id, outputLimitBytes: 16384 }) });
  writeFileSync(join(options.dir, 'output', 'small'), Buffer.alloc(100));
  await supervisor.checkOutput();
  t.equal(supervisor.stopCause, null, 'default: /output within its limit lets the job run');
  t.ok(await running(box));

  writeFileSync(join(options.dir, 'output', 'big'), Buffer.alloc(65536));
  await supervisor.checkOutput();
  t.equal(supervisor.stopCause, 'watchdog', 'behavior: /output past its limit stops the job');
  t.notOk(await running(box), 'at once, without a grace period');
  t.match(lines.of('system'), [/^\/output holds \d+ bytes, more than the 16384 allowed: stopping the job$/]);
  await supervisor.cancel('canceled after the watchdog');
  t.equal(supervisor.stopCause, 'watchdog', 'the first cause stays');
});

t.test('error: followEgress says when an allowlist job\'s proxy is missing', async (t) => {
  const owner = uniqueName('t');
  const box = await container(t, owner, 'sleep 60');
  const spec = busyboxSpec({ networkPolicy: { mode: 'allowlist', allow: ['example.org'] } });
  const { supervisor, lines } = await supervise(t, box, { spec, state: stateOf(spec, { containerId: box.id }) });
  supervisor.followEgress();
  await waitFor(() => lines.of('system').length > 0);
  t.same(lines.of('system'), ['egress: the proxy container is gone; the job reaches nothing'], 'error: an allowlist job whose proxy is missing says so');
  await supervisor.detach();
});

t.test('behavior: a resumed job\'s lines go where they are missing, and exit.json records the exit', async (t) => {
  const owner = uniqueName('t');
  const box = await container(t, owner, 'echo a; echo b; echo c; exit 3');
  await box.wait();
  // The cursors Docker gives the three lines, as a restarted agent would hold them.
  const cursors: LogCursor[] = [];
  const parser = new DockerLogParser((_s, _text, cursor) => cursors.push(cursor));
  parser.push((await box.logs({ stdout: true, stderr: true, timestamps: true })) as unknown as Buffer);
  parser.end();
  t.equal(cursors.length, 3);

  const { supervisor, options, lines, logPath } = await supervise(t, box, {
    fileAfter: cursors[1]!,
    sinkAfter: formatCursor(cursors[0]!),
    exited: Promise.resolve({ StatusCode: 3 }),
  });
  const exit: JobExit = await supervisor.run().done;
  t.same(lines.of('stdout'), ['b', 'c'], 'behavior: the sink gets the lines after the spool\'s');
  const fileLines = readFileSync(logPath, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { stream: string; line: string });
  t.same(fileLines.filter((l) => l.stream === 'stdout').map((l) => l.line), ['c'], 'the file gets only the lines it lacks');
  t.equal(exit.exitCode, 3);
  t.equal(lines.of('system').at(-1), 'exited with code 3');
  t.same(JSON.parse(readFileSync(join(options.dir, 'exit.json'), 'utf8')), exit, 'exit.json holds the record');
});

t.test('behavior: detach leaves the container running and rejects done with DetachedError', async (t) => {
  const owner = uniqueName('t');
  const box = await container(t, owner, 'while true; do echo tick; sleep 0.1; done');
  const { supervisor, options, lines } = await supervise(t, box);
  const handle = supervisor.run();
  await waitFor(() => lines.of('stdout').length >= 2);
  await handle.detach();
  const err = await handle.done.then(() => null, (e: unknown) => e);
  t.ok(err instanceof DetachedError, 'behavior: done rejects with DetachedError');
  t.ok(err instanceof GpufarmError, 'a GpufarmError');
  t.same([(err as DetachedError).code, (err as DetachedError).retryable, (err as Error).message], ['detached', false, `stopped supervising ${options.state.spec.assignmentId}`]);
  t.ok(await running(box), 'the container runs on');
  const seen = lines.lines.length;
  await new Promise((r) => setTimeout(r, 300));
  t.equal(lines.lines.length, seen, 'no line is forwarded once detached');
});

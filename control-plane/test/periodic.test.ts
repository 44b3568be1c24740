import t from 'tap';
import { MAX_BACKOFF_MS, retryDelayMs } from '../src/background/notified-loop.js';
import { runSteps, startPeriodic, StepsFailedError } from '../src/background/periodic.js';
import { captureLog, LEVEL } from './helpers/logger.js';

t.test('retryDelayMs: the period, then doubling waits, capped', async (t) => {
  t.equal(retryDelayMs(500, 0), 500);
  t.equal(retryDelayMs(500, 1), 1_000);
  t.equal(retryDelayMs(500, 2), 2_000);
  t.equal(retryDelayMs(500, 7), MAX_BACKOFF_MS, 'capped at the maximum');
  t.equal(retryDelayMs(500, 1_000), MAX_BACKOFF_MS, 'no overflow after many failures');
  t.equal(retryDelayMs(120_000, 3), 120_000, 'never below the period');
});

t.test('runSteps: every step runs; the failing ones are named with their errors', async (t) => {
  const ran: string[] = [];
  const err = await runSteps([
    ['a', async () => ran.push('a')],
    ['b', async () => { ran.push('b'); throw new Error('b broke'); }],
    ['c', async () => ran.push('c')],
  ]).catch((e: unknown) => e);
  t.same(ran, ['a', 'b', 'c']);
  t.ok(err instanceof StepsFailedError);
  t.same((err as StepsFailedError).failed.map((f) => f.name), ['b']);
  t.equal((err as Error).message, 'b: b broke');
});

t.test('startPeriodic: a failing pass is logged with its loop, error, streak and the next wait; a pass that goes through says it recovered', async (t) => {
  const { log, lines } = captureLog();
  let calls = 0;
  const loop = startPeriodic({
    name: 'test loop',
    intervalMs: 0,
    run: async () => {
      calls++;
      if (calls <= 2) throw new Error(`failure ${calls}`);
    },
    log,
  });
  t.teardown(() => loop.close());
  await loop.runOnce();
  await loop.runOnce();
  await loop.runOnce();
  await loop.runOnce();
  t.equal(calls, 4);
  t.match(lines, [
    { level: LEVEL.warn, loop: 'test loop', failures: 1, retryInMs: 0, err: { type: 'Error', message: 'failure 1' }, msg: 'test loop pass failed' },
    { level: LEVEL.debug, loop: 'test loop', failures: 2, err: { message: 'failure 2' } },
    { level: LEVEL.warn, loop: 'test loop', failures: 2, msg: 'test loop recovered after 2 failed passes' },
  ]);
  t.equal(lines.length, 3);
});

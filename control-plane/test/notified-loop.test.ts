import t, { type Test } from 'tap';
import { createNotifiedLoop, type NotifiedLoopOptions, type PassCause } from '../src/background/notified-loop.js';
import { captureLog, LEVEL } from './helpers/logger.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A `listen` port whose notifications the test sends, and whose first `failures` calls reject. */
function fakeListener(failures = 0) {
  const handlers = new Map<string, (payload: string) => void>();
  let calls = 0;
  return {
    calls: () => calls,
    notify: (channel: string) => handlers.get(channel)?.(''),
    listening: (channel: string) => handlers.has(channel),
    db: {
      async listen(channel: string, onNotify: (payload: string) => void) {
        calls++;
        if (calls <= failures) throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
        handlers.set(channel, onNotify);
        return async () => void handlers.delete(channel);
      },
    },
  };
}

/** A loop named `test loop` on `options`, whose log lines the test reads; closed when the test ends. */
function testLoop(t: Test, options: Omit<NotifiedLoopOptions, 'name' | 'log'>) {
  const { log, lines } = captureLog();
  const loop = createNotifiedLoop({ name: 'test loop', log, ...options });
  t.teardown(() => loop.close());
  return { loop, lines };
}

t.test('behavior: a burst of notifications is one pass after the debounce; an undebounced channel passes at once', async (t) => {
  const pg = fakeListener();
  const passes: PassCause[] = [];
  const { loop } = testLoop(t, {
    intervalMs: 60_000,
    db: pg.db,
    channels: { burst: { debounceMs: 80 }, now: { debounceMs: 0 } },
    run: async (cause) => void passes.push(cause),
  });
  await loop.start();
  t.equal(passes.length, 1, 'start runs a first pass');
  t.match(passes[0], { asked: true, timer: false, listening: true });
  for (let i = 0; i < 20; i++) pg.notify('burst');
  await sleep(20);
  t.equal(passes.length, 1, 'nothing before the debounce ends');
  await sleep(150);
  t.equal(passes.length, 2, 'twenty notifications, one pass');
  t.same([...passes[1]!.notified], ['burst']);
  pg.notify('now');
  await sleep(5);
  t.equal(passes.length, 3, 'a channel without debounce passes at once');
  t.same([...passes[2]!.notified], ['now']);
});

t.test('behavior: a request during a pass runs exactly one more pass after it, with every cause merged', async (t) => {
  const pg = fakeListener();
  const passes: PassCause[] = [];
  let release: () => void = () => {};
  const { loop } = testLoop(t, {
    intervalMs: 60_000,
    db: pg.db,
    channels: { a: { debounceMs: 0 }, b: { debounceMs: 0 } },
    run: async (cause) => {
      passes.push(cause);
      if (passes.length === 1) await new Promise<void>((r) => (release = r));
    },
  });
  const started = loop.start();
  await sleep(5);
  pg.notify('a');
  pg.notify('b');
  loop.wake();
  release();
  await started;
  await sleep(5);
  t.equal(passes.length, 2);
  t.same([...passes[1]!.notified].sort(), ['a', 'b']);
  t.equal(passes[1]!.asked, true);
});

t.test('error: a failed listen is logged once, passes run on every tick meanwhile, and the tick listens again', async (t) => {
  const pg = fakeListener(2);
  const passes: PassCause[] = [];
  const { loop, lines } = testLoop(t, { intervalMs: 40, db: pg.db, channels: { fleet: { debounceMs: 0 } }, run: async (cause) => void passes.push(cause) });
  await loop.start();
  t.equal(loop.listening, false);
  t.match(passes[0], { listening: false }, 'the pass knows notifications cannot arrive');
  t.match(lines, [{ level: LEVEL.warn, loop: 'test loop', channel: 'fleet', err: { message: 'connect ECONNREFUSED', code: 'ECONNREFUSED' }, retryInMs: 40 }]);
  const deadline = Date.now() + 5_000;
  while (Date.now() < deadline && !loop.listening) await sleep(10);
  t.equal(loop.listening, true, 'a later tick listened again');
  t.equal(pg.calls(), 3, 'one try per tick');
  t.ok(passes.some((p) => p.timer && !p.listening), 'the period went on meanwhile');
  t.equal(lines.filter((l) => l.level === LEVEL.warn).length, 2, 'the outage is logged once, not per try, and its end once');
  t.match(lines.at(-1), { level: LEVEL.warn, loop: 'test loop', msg: /listening again/ });
  const before = passes.length;
  pg.notify('fleet');
  await sleep(5);
  t.ok(passes.length > before && passes.at(-1)!.notified.has('fleet'), 'notifications arrive again');
});

t.test('error: a failed pass is logged with its streak; the timer backs off; woken passes wait for it, runNow does not', async (t) => {
  // The wait doubles from 40 ms and stops at 80 ms: the second failure no longer grows it.
  let fail = true;
  let calls = 0;
  const { loop, lines } = testLoop(t, {
    intervalMs: 40,
    maxBackoffMs: 80,
    run: async () => {
      calls++;
      if (fail) throw new Error(`failure ${calls}`);
    },
    failureMessage: () => 'test loop failed; serving the old answer',
  });
  await loop.start();
  t.match(lines, [{ level: LEVEL.warn, loop: 'test loop', failures: 1, retryInMs: 80, err: { message: 'failure 1' }, msg: 'test loop failed; serving the old answer' }]);
  loop.wake();
  await sleep(10);
  t.equal(calls, 1, 'a wake during the backoff waits for the timer');
  await t.rejects(loop.runNow(), { message: 'failure 2' }, 'runNow runs at once and rejects with the failure');
  t.match(lines[1], { level: LEVEL.debug, failures: 2, retryInMs: 80, err: { message: 'failure 2' } }, 'a repeat whose wait no longer grows is not a warning');
  fail = false;
  await loop.runNow();
  t.match(lines[2], { level: LEVEL.warn, loop: 'test loop', failures: 2, msg: /recovered after 2 failed passes/ });
  const after = calls;
  await sleep(130);
  t.ok(calls > after, 'the period is back to 40 ms');
});

t.test('error: each failure that doubles the wait is a warning, the rest debug lines, every tenth a warning again', async (t) => {
  const { loop, lines } = testLoop(t, { intervalMs: 10, maxBackoffMs: 40, run: async () => Promise.reject(new Error('down')) });
  for (let i = 0; i < 10; i++) await loop.runNow().catch(() => {});
  t.same(
    lines.map((l) => [l.level, l.failures, l.retryInMs]),
    [
      [LEVEL.warn, 1, 20],
      [LEVEL.warn, 2, 40],
      ...[3, 4, 5, 6, 7, 8, 9].map((n) => [LEVEL.debug, n, 40]),
      [LEVEL.warn, 10, 40],
    ],
  );
  t.ok(lines.every((l) => l.loop === 'test loop' && l.err?.message === 'down'), 'each with its loop and error');
});

t.test('behavior: close waits for the running pass, then nothing runs', async (t) => {
  const pg = fakeListener();
  let release: () => void = () => {};
  let calls = 0;
  // The test closes it itself; the teardown's second close finds nothing left to stop.
  const { loop } = testLoop(t, {
    intervalMs: 20,
    db: pg.db,
    channels: { c: { debounceMs: 0 } },
    run: async () => {
      calls++;
      if (calls === 2) await new Promise<void>((r) => (release = r));
    },
  });
  await loop.start();
  loop.wake();
  await sleep(5);
  t.equal(calls, 2, 'the second pass runs');
  let closed = false;
  const closing = loop.close().then(() => (closed = true));
  pg.notify('c');
  await sleep(50);
  t.equal(closed, false, 'close waits for the running pass');
  t.equal(pg.listening('c'), false, 'the listener is stopped at once');
  release();
  await closing;
  await sleep(60);
  t.equal(calls, 2, 'no pass after close: the timer and the request during it are dropped');
  await loop.runNow();
  t.equal(calls, 2, 'runNow after close resolves without a pass');
});

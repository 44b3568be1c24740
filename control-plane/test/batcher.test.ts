import t from 'tap';
import { createBatcher } from '../src/db/batcher.js';

/** A hand-released batch function: records each batch and answers when told to. */
function gatedRun() {
  const batches: number[][] = [];
  const gates: Array<() => void> = [];
  const run = async (items: readonly number[]) => {
    batches.push([...items]);
    await new Promise<void>((resolve) => gates.push(resolve));
    if (items.includes(13)) throw new Error('13 is refused');
    return items.map((n) => n * 10);
  };
  const releaseAll = async () => {
    while (gates.length > 0) gates.shift()!();
    await new Promise((resolve) => setImmediate(resolve));
  };
  return { run, batches, releaseAll };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

t.test('default: a lone call goes out alone and gets its own result', async (t) => {
  const gated = gatedRun();
  const call = createBatcher(gated.run, { maxInFlight: 1, maxBatch: 10 });
  const result = call(1);
  await settle();
  await gated.releaseAll();
  t.equal(await result, 10);
  t.same(gated.batches, [[1]]);
});

t.test('behavior: calls made while a batch is out leave together, in arrival order', async (t) => {
  const gated = gatedRun();
  const call = createBatcher(gated.run, { maxInFlight: 1, maxBatch: 10 });
  const first = call(1);
  await settle();
  const rest = [2, 3, 4].map((n) => call(n));
  await settle();
  t.same(gated.batches, [[1]], 'the later calls wait while the first batch is out');
  await gated.releaseAll();
  await gated.releaseAll();
  t.same(await Promise.all([first, ...rest]), [10, 20, 30, 40]);
  t.same(gated.batches, [[1], [2, 3, 4]]);
});

t.test('args: maxBatch splits a long queue and maxInFlight bounds the batches out at once', async (t) => {
  const gated = gatedRun();
  const call = createBatcher(gated.run, { maxInFlight: 2, maxBatch: 2 });
  const results = [1, 2, 3, 4, 5].map((n) => call(n));
  await settle();
  t.same(gated.batches, [[1, 2], [3, 4]], 'two batches of two out, the fifth call waits');
  for (let i = 0; i < 3; i++) await gated.releaseAll();
  t.same(await Promise.all(results), [10, 20, 30, 40, 50]);
  t.same(gated.batches, [[1, 2], [3, 4], [5]]);
});

t.test('error: a failing batch is retried item by item, so only the bad item fails', async (t) => {
  const gated = gatedRun();
  const call = createBatcher(gated.run, { maxInFlight: 1, maxBatch: 10 });
  const results = [12, 13, 14].map((n) => call(n).then((v) => ({ ok: v }), (err: Error) => ({ error: err.message })));
  for (let i = 0; i < 3; i++) await gated.releaseAll();
  t.same(await Promise.all(results), [{ ok: 120 }, { error: '13 is refused' }, { ok: 140 }]);
  t.same(gated.batches, [[12, 13, 14], [12], [13], [14]]);
});

t.test('error: a batch function that answers the wrong number of results fails every caller', async (t) => {
  const call = createBatcher(async (items: readonly number[]) => items.slice(1), { maxInFlight: 1, maxBatch: 10 });
  await t.rejects(call(1), /a batch of 1 gave 0 results/);
});

t.test('error: options below 1 are refused', async (t) => {
  t.throws(() => createBatcher(async (items: readonly number[]) => items, { maxInFlight: 0, maxBatch: 1 }), RangeError);
});

t.test('behavior: with a linger, calls spread over it leave in one batch, and what queues during a batch waits for the next', async (t) => {
  const batches: number[][] = [];
  const call = createBatcher(async (items: readonly number[]) => {
    batches.push([...items]);
    return items.map((n) => n * 10);
  }, { maxInFlight: 1, maxBatch: 10, lingerMs: 100 });
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  const first = [call(1), sleep(20).then(() => call(2)), sleep(40).then(() => call(3))];
  t.same(await Promise.all(first), [10, 20, 30]);
  t.same(batches, [[1, 2, 3]], 'the 100 ms linger gathered calls made 20 and 40 ms after the first');
  t.same(await Promise.all([call(4), call(5)]), [40, 50]);
  t.same(batches, [[1, 2, 3], [4, 5]]);
});

/** `send`'s outcomes, as `[item, result or error message]` in the order they came. */
function recordingSend(call: ReturnType<typeof createBatcher<number, number>>) {
  const outcomes: Array<[number, number | string]> = [];
  let inCall = false;
  const send = (n: number) => {
    inCall = true;
    call.send(
      n,
      (v) => {
        if (inCall) throw new Error('resolved within send');
        outcomes.push([n, v]);
      },
      (err: unknown) => {
        if (inCall) throw new Error('rejected within send');
        outcomes.push([n, (err as Error).message]);
      },
    );
    inCall = false;
  };
  return { send, outcomes };
}

t.test('behavior: send batches with the promise calls and answers each item once, in order, from a later turn', async (t) => {
  const gated = gatedRun();
  const call = createBatcher(gated.run, { maxInFlight: 1, maxBatch: 10 });
  const { send, outcomes } = recordingSend(call);
  send(1);
  const promised = call(2);
  send(3);
  await settle();
  t.same(gated.batches, [[1, 2, 3]], 'send and the promise calls share a batch');
  t.same(outcomes, [], 'nothing answered before the batch is');
  await gated.releaseAll();
  t.equal(await promised, 20);
  t.same(outcomes, [[1, 10], [3, 30]]);
  send(4);
  send(5);
  await gated.releaseAll();
  await gated.releaseAll();
  t.same(outcomes, [[1, 10], [3, 30], [4, 40], [5, 50]], 'each callback once');
});

t.test('error: send: a failing batch is retried item by item and only the bad item is rejected', async (t) => {
  const gated = gatedRun();
  const { send, outcomes } = recordingSend(createBatcher(gated.run, { maxInFlight: 1, maxBatch: 10 }));
  for (const n of [12, 13, 14]) send(n);
  for (let i = 0; i < 3; i++) await gated.releaseAll();
  t.same(outcomes, [[12, 120], [13, '13 is refused'], [14, 140]]);
  t.same(gated.batches, [[12, 13, 14], [12], [13], [14]]);
  send(13);
  await settle();
  await gated.releaseAll();
  t.same(outcomes.at(-1), [13, '13 is refused'], 'a batch of one is rejected without a retry');
  t.same(gated.batches.length, 5);
});

t.test('error: send: a callback that throws leaves the batch and the other items alone and surfaces as an unhandled rejection', async (t) => {
  const gated = gatedRun();
  const call = createBatcher(gated.run, { maxInFlight: 1, maxBatch: 10 });
  const unhandled: unknown[] = [];
  // tap's own listener would fail the test: the thrown error is what this test expects.
  const listeners = process.listeners('unhandledRejection');
  process.removeAllListeners('unhandledRejection');
  const catcher = (reason: unknown) => unhandled.push(reason);
  process.on('unhandledRejection', catcher);
  t.teardown(() => {
    process.off('unhandledRejection', catcher);
    for (const l of listeners) process.on('unhandledRejection', l);
  });
  const results: number[] = [];
  const rejected = (err: unknown) => t.fail(`rejected: ${String(err)}`);
  call.send(1, (v) => results.push(v), rejected);
  call.send(2, () => {
    throw new Error('the caller broke');
  }, rejected);
  call.send(3, (v) => results.push(v), rejected);
  await settle();
  await gated.releaseAll();
  await new Promise((resolve) => setTimeout(resolve, 20));
  t.same(results, [10, 30], 'the items around it got their results');
  t.same(gated.batches, [[1, 2, 3]], 'no retry: the batch itself succeeded');
  t.same(unhandled.map((e) => (e as Error).message), ['the caller broke']);
});

/**
 * Group commit for a hot statement: calls that arrive while earlier ones are on their way to the
 * database are sent together, as one statement over one round trip. Under light load every call
 * goes out at once, alone (no added wait); under heavy load the round trips and commits per call
 * shrink, which is what bounds a 2-core machine (each round trip costs a write and a read system
 * call on both sides).
 *
 * `run` gets the items in arrival order and must answer one result per item, in the same order.
 * When a batch of several fails, each of its items is retried alone, so one bad item never fails
 * the others and each caller gets its own error.
 *
 * @example
 *   const lookUp = createBatcher((hashes: string[]) => findKeysByHash(db, hashes), { maxInFlight: 2, maxBatch: 64 });
 *   const record = await lookUp(hash);
 */
export interface BatcherOptions {
  /** Batches on their way at once; more calls wait and join the next batch. */
  maxInFlight: number;
  /** Items in one batch at most (bounds the statement's size). */
  maxBatch: number;
  /**
   * How long the first call of a batch waits for others (default 0: until the next turn of the
   * event loop). For writes nobody waits on promptly, such as heartbeats: calls spread evenly
   * over time would otherwise each go out alone.
   */
  lingerMs?: number;
}

interface Pending<I, O> {
  item: I;
  resolve(value: O): void;
  reject(reason: unknown): void;
}

/**
 * A batched call: `batcher(item)` answers with a promise; `batcher.send(item, resolve, reject)`
 * calls one of the two instead, once, from a later turn (never within `send`), as the promise
 * would settle. `send` is for the hottest callers (a heartbeat of every machine every 10 s):
 * no promise and no reaction per call when they pass functions made once.
 */
export interface Batcher<I, O> {
  (item: I): Promise<O>;
  send(item: I, resolve: (value: O) => void, reject: (reason: unknown) => void): void;
}

/**
 * Calls a `send` callback as a promise's reaction would meet it: what it throws does not reach
 * the batcher (nor the other items of its batch) but becomes an unhandled rejection.
 */
function settle<A>(callback: (value: A) => void, value: A): void {
  try {
    callback(value);
  } catch (err) {
    void Promise.reject(err);
  }
}

export function createBatcher<I, O>(run: (items: readonly I[]) => Promise<readonly O[]>, options: BatcherOptions): Batcher<I, O> {
  if (!(options.maxInFlight >= 1 && options.maxBatch >= 1)) throw new RangeError('maxInFlight and maxBatch must be at least 1');
  const queue: Pending<I, O>[] = [];
  let inFlight = 0;
  let scheduled = false;

  const runAlone = async (pending: Pending<I, O>) => {
    let result: O;
    try {
      [result] = (await run([pending.item])) as [O];
    } catch (err) {
      settle(pending.reject, err);
      return;
    }
    settle(pending.resolve, result);
  };

  const send = async (batch: Pending<I, O>[]) => {
    let results: readonly O[];
    try {
      results = await run(batch.map((p) => p.item));
      if (results.length !== batch.length) throw new Error(`a batch of ${batch.length} gave ${results.length} results`);
    } catch (err) {
      if (batch.length === 1) settle(batch[0]!.reject, err);
      else await Promise.all(batch.map(runAlone));
      return;
    }
    for (let i = 0; i < batch.length; i++) settle(batch[i]!.resolve, results[i] as O);
  };

  const drain = () => {
    scheduled = false;
    while (inFlight < options.maxInFlight && queue.length > 0) {
      const batch = queue.splice(0, options.maxBatch);
      inFlight++;
      void send(batch).finally(() => {
        inFlight--;
        // With a linger, what queued meanwhile waits its turn too, so batches stay full.
        if (options.lingerMs) schedule();
        else drain();
      });
    }
  };

  const schedule = () => {
    if (scheduled || queue.length === 0 || inFlight >= options.maxInFlight) return;
    scheduled = true;
    if (options.lingerMs) setTimeout(drain, options.lingerMs);
    else setImmediate(drain);
  };

  const enqueue = (pending: Pending<I, O>) => {
    queue.push(pending);
    // Calls made in the same turn of the event loop (requests parsed from one read) leave together.
    schedule();
  };
  const batcher = (item: I) => new Promise<O>((resolve, reject) => enqueue({ item, resolve, reject }));
  batcher.send = (item: I, resolve: (value: O) => void, reject: (reason: unknown) => void) => enqueue({ item, resolve, reject });
  return batcher;
}

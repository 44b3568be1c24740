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

export function createBatcher<I, O>(run: (items: readonly I[]) => Promise<readonly O[]>, options: BatcherOptions): (item: I) => Promise<O> {
  if (!(options.maxInFlight >= 1 && options.maxBatch >= 1)) throw new RangeError('maxInFlight and maxBatch must be at least 1');
  const queue: Pending<I, O>[] = [];
  let inFlight = 0;
  let scheduled = false;

  const runAlone = async (pending: Pending<I, O>) => {
    try {
      const [result] = await run([pending.item]);
      pending.resolve(result as O);
    } catch (err) {
      pending.reject(err);
    }
  };

  const send = async (batch: Pending<I, O>[]) => {
    try {
      const results = await run(batch.map((p) => p.item));
      if (results.length !== batch.length) throw new Error(`a batch of ${batch.length} gave ${results.length} results`);
      batch.forEach((p, i) => p.resolve(results[i] as O));
    } catch (err) {
      if (batch.length === 1) batch[0]!.reject(err);
      else await Promise.all(batch.map(runAlone));
    }
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

  return (item: I) =>
    new Promise<O>((resolve, reject) => {
      queue.push({ item, resolve, reject });
      // Calls made in the same turn of the event loop (requests parsed from one read) leave together.
      schedule();
    });
}

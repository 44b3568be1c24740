import { settleFinished } from './finish.js';
import type { ExecutionDeps } from './lifecycle.js';
import { listUnsettledFinished } from './store.js';

/**
 * Background upkeep of the execution slice: assignments the machine finished but whose
 * settlement failed (chain down, a crash in between) are settled again, plus any extra sweeps
 * given (artifact expiry). Each pass is safe to run on several replicas at once: every write it
 * makes is guarded.
 */
export function startExecutionWorker(
  deps: ExecutionDeps,
  options: { intervalMs: number; sweeps?: Array<{ name: string; run: () => Promise<unknown> }> },
): { close(): Promise<void>; runOnce(): Promise<void> } {
  let closed = false;
  let running: Promise<void> | null = null;
  const pass = async () => {
    for (const id of await listUnsettledFinished(deps.db, 20)) {
      if (closed) return;
      await settleFinished(deps, id).catch((err: unknown) => deps.log?.(`settling assignment ${id} failed; retried on the next pass`, err));
    }
    for (const sweep of options.sweeps ?? []) {
      if (closed) return;
      await sweep.run().catch((err: unknown) => deps.log?.(`${sweep.name} failed; retried on the next pass`, err));
    }
  };
  const runOnce = () => (running ??= pass().finally(() => (running = null)));
  const timer = setInterval(() => void runOnce().catch((err: unknown) => deps.log?.('execution worker pass failed', err)), options.intervalMs);
  timer.unref();
  return {
    runOnce,
    async close() {
      closed = true;
      clearInterval(timer);
      await running?.catch(() => {});
    },
  };
}

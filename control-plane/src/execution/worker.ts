import { runSteps, startPeriodic, type Periodic } from '../background/periodic.js';
import { settleFinished } from './finish.js';
import type { ExecutionDeps } from './deps.js';
import { listUnsettledFinished } from './store.js';
import { silentLogger } from '../logger.js';

/**
 * Background upkeep of the execution slice: assignments the machine finished but whose
 * settlement failed (chain down, a crash in between) are settled again, plus any extra sweeps
 * given (artifact expiry). Each pass is safe to run on several replicas at once: every write it
 * makes is guarded. A step that fails does not stop the others; the pass then counts as failed
 * and the next one waits longer (`startPeriodic`).
 */
export function startExecutionWorker(
  deps: ExecutionDeps,
  options: { intervalMs: number; sweeps?: Array<{ name: string; run: () => Promise<unknown> }> },
): Periodic {
  const pass = async () => {
    const unsettled = await listUnsettledFinished(deps.db, 20);
    await runSteps([
      ...unsettled.map((id) => [`settling assignment ${id}`, () => settleFinished(deps, id)] as const),
      ...(options.sweeps ?? []).map((sweep) => [sweep.name, sweep.run] as const),
    ]);
  };
  return startPeriodic({ name: 'execution worker', intervalMs: options.intervalMs, run: pass, log: deps.log ?? silentLogger });
}

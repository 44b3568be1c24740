import { START_FIGURES_DAYS, START_FIGURES_RUNS, type MachineStartTimes } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';
import { machineStartFigures } from './store.js';

/** A machine's start figures as the operator and admin machine pages show them (`MachineStartTimes`). */
export async function machineStartTimes(db: Queryable, machineId: string, nowMs = Date.now()): Promise<MachineStartTimes> {
  const since = new Date(nowMs - START_FIGURES_DAYS * 86_400_000);
  const figures = await machineStartFigures(db, machineId, { since, limit: START_FIGURES_RUNS });
  return { sinceDays: START_FIGURES_DAYS, maxRuns: START_FIGURES_RUNS, toRunningMs: figures.toRunning, toFirstLogMs: figures.toFirstLog };
}

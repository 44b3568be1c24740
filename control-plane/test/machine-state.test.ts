import t from 'tap';
import { machineState, machineVerdict, type MachineStateFacts } from '@gpufarm/shared';
import { MACHINE_GPU_FACTS, MACHINE_STATE_SQL, MACHINE_VERDICT_SQL } from '../src/machines/state-store.js';
import { createPostgresTestDatabase } from './helpers/database.js';

/**
 * A machine's state and verdict have one rule (`machineState`, `machineVerdict`) and SQL written
 * from it (`machines/state-store.ts`): over every combination of the facts they read, PostgreSQL
 * answers what TypeScript answers.
 */

type Gpu = { busy: boolean; health: 'healthy' | 'warning' | 'failed' };
const STATUSES = ['online', 'unhealthy', 'draining', 'offline', 'disabled'] as const;
const ONE_GPU: Gpu[] = (['healthy', 'warning', 'failed'] as const).flatMap((health) => [false, true].map((busy) => ({ busy, health })));
/** No GPU, each single GPU, and each unordered pair of them. */
const GPU_SETS: Gpu[][] = [[], ...ONE_GPU.map((g) => [g]), ...ONE_GPU.flatMap((a, i) => ONE_GPU.slice(i).map((b) => [a, b]))];

interface Case {
  id: string;
  status: MachineStateFacts['status'];
  cordoned: boolean;
  drainRequested: boolean;
  gpus: Gpu[];
}

const cases: Case[] = [];
for (const status of STATUSES) {
  for (const cordoned of [false, true]) {
    for (const drainRequested of [false, true]) {
      for (const gpus of GPU_SETS) cases.push({ id: `m${cases.length}`, status, cordoned, drainRequested, gpus });
    }
  }
}

function facts(c: Case): MachineStateFacts {
  return {
    status: c.status,
    cordoned: c.cordoned,
    drainRequested: c.drainRequested,
    gpus: c.gpus.length,
    failedGpus: c.gpus.filter((g) => g.health === 'failed').length,
    troubledGpus: c.gpus.filter((g) => g.health !== 'healthy').length,
    busy: c.gpus.some((g) => g.busy),
  };
}

t.test('behavior: the SQL state and verdict agree with the TypeScript rules over every combination', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const answers = await db.transaction(async (tx) => {
    // Temporary tables of the columns the rules read shadow the real ones (pg_temp is searched
    // first), so each combination is a row without the farms, classes and keys a machine needs.
    await tx.query('CREATE TEMP TABLE machines (id text PRIMARY KEY, status text, cordoned boolean, drain_requested boolean) ON COMMIT DROP');
    await tx.query('CREATE TEMP TABLE machine_gpus (machine_id text, gpu_index int, busy boolean, health text) ON COMMIT DROP');
    await tx.query(
      `INSERT INTO machines SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(id text, status text, cordoned boolean, drain_requested boolean)`,
      [JSON.stringify(cases.map((c) => ({ id: c.id, status: c.status, cordoned: c.cordoned, drain_requested: c.drainRequested })))],
    );
    await tx.query(
      `INSERT INTO machine_gpus SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(machine_id text, gpu_index int, busy boolean, health text)`,
      [JSON.stringify(cases.flatMap((c) => c.gpus.map((g, i) => ({ machine_id: c.id, gpu_index: i, busy: g.busy, health: g.health }))))],
    );
    return tx.query<{ id: string; state: string; verdict: string }>(
      `WITH g AS (${MACHINE_GPU_FACTS}) SELECT m.id, ${MACHINE_STATE_SQL} AS state, ${MACHINE_VERDICT_SQL} AS verdict
         FROM machines m LEFT JOIN g ON g.machine_id = m.id`,
    );
  });
  const byId = new Map(answers.map((a) => [a.id, a]));
  const disagree = cases
    .map((c) => ({ c, sql: byId.get(c.id), ts: { state: machineState(facts(c)), verdict: machineVerdict(facts(c)) } }))
    .filter(({ sql, ts }) => sql?.state !== ts.state || sql?.verdict !== ts.verdict)
    .map(({ c, sql, ts }) => `${JSON.stringify(facts(c))}: SQL ${sql?.state}/${sql?.verdict}, TS ${ts.state}/${ts.verdict}`);
  t.equal(answers.length, cases.length, `${cases.length} combinations`);
  t.same(disagree, [], 'each disagreement is listed with its facts');
  t.same(new Set(answers.map((a) => a.state)), new Set(['online', 'busy', 'draining', 'drained', 'offline', 'failed', 'cordoned']), 'every state is reached');
});

t.test('behavior: the rules in the cases the three old answers differed on', async (t) => {
  const base: MachineStateFacts = { status: 'online', cordoned: false, drainRequested: false, gpus: 2, failedGpus: 0, troubledGpus: 0, busy: false };
  t.equal(machineState({ ...base, failedGpus: 2, troubledGpus: 2 }), 'failed', 'every GPU failed: failed, though the agent reports the machine well');
  t.equal(machineVerdict({ ...base, gpus: 0 }), 'failed', 'no GPU offered: failed (nothing of it can be offered)');
  t.equal(machineState({ ...base, gpus: 0 }), 'failed');
  t.equal(machineState({ ...base, busy: true }), 'busy', 'a reserved GPU is busy, whatever job holds it');
  t.equal(machineState({ ...base, drainRequested: true, busy: true }), 'draining');
  t.equal(machineState({ ...base, drainRequested: true }), 'drained');
  t.equal(machineState({ ...base, status: 'unhealthy', cordoned: true }), 'failed', 'failed before cordoned');
  t.equal(machineVerdict({ ...base, failedGpus: 1, troubledGpus: 1 }), 'warning', 'one GPU of two failed: still offered, a warning');
});

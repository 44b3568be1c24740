import t from 'tap';
import type { GpuHealthReport } from '@gpufarm/shared';
import { reconcileGpus } from '../src/machines/gpus-store.js';
import { machineGpuHealth, judgeReports, withLiveFigures } from '../src/fleet/gpu-health.js';
import { writeGpuVerdicts } from '../src/machines/gpus-store.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { createPostgresTestDatabase } from './helpers/database.js';

/** The stored verdicts: written on change only, keyed by UUID, and not inherited by another card in the slot. */

const NOW = new Date('2026-11-25T12:00:00Z');

function report(index: number, uuid: string | null, extra: Partial<GpuHealthReport> = {}): GpuHealthReport {
  return {
    index,
    uuid,
    pciBusId: null,
    lost: false,
    lostReason: null,
    ecc: { volatileCorrectable: 0, volatileUncorrectable: 0, aggregateCorrectable: 0, aggregateUncorrectable: 0 },
    retiredPages: { singleBit: null, doubleBit: null, pending: null },
    remappedRows: { correctable: 0, uncorrectable: 0, pending: false, failure: false },
    clockEvents: { hwSlowdown: false, hwThermalSlowdown: false, hwPowerBrakeSlowdown: false, swThermalSlowdown: false, swPowerCap: false },
    temperatureC: 40,
    slowdownTempC: 89,
    shutdownTempC: 92,
    fanPercent: null,
    utilizationPercent: 0,
    pcie: { currentGen: 4, maxGen: 4, currentWidth: 16, maxWidth: 16 },
    xids: [],
    ...extra,
  };
}

t.test('behavior: verdicts written on change, by UUID; the assignment on a GPU that fails is returned; a new card in the slot starts healthy', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const farm = await createFarm(db);
  const machine = await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'a100-80gb', gpuCount: 2, pricePerGpuHourMicroUsd: 1_000_000 });
  const rows = [
    { gpu_index: 0, uuid: 'GPU-a', class_id: 'a100-80gb', vram_bytes: 80 * 2 ** 30 },
    { gpu_index: 1, uuid: 'GPU-b', class_id: 'a100-80gb', vram_bytes: 80 * 2 ** 30 },
  ];
  await reconcileGpus(db, machine.id, rows);
  const health = async () => (await db.query<{ gpu_index: number; health: string }>('SELECT gpu_index, health FROM machine_gpus WHERE machine_id = $1 ORDER BY gpu_index', [machine.id])).map((r) => r.health);

  t.same(await writeGpuVerdicts(db, machine.id, judgeReports([report(0, 'GPU-a'), report(1, 'GPU-b')], NOW)), []);
  t.same(await health(), ['healthy', 'healthy']);
  const changedAt = async () => (await db.query<{ at: Date | null }>('SELECT health_changed_at AS at FROM machine_gpus WHERE machine_id = $1 AND gpu_index = 1', [machine.id]))[0]!.at;
  t.equal(await changedAt(), null, 'an unchanged verdict is not written');

  // GPU-b (index 1) holds a running assignment when row remapping fails on it.
  await db.query(`UPDATE machine_gpus SET busy = true, assignment_id = 'asg_x' WHERE machine_id = $1 AND gpu_index = 1`, [machine.id]);
  const failed = judgeReports([report(0, 'GPU-a'), report(1, 'GPU-b', { remappedRows: { correctable: 0, uncorrectable: 9, pending: false, failure: true } })], NOW);
  t.same(await writeGpuVerdicts(db, machine.id, failed), [], 'an assignment id that is no live assignment is not returned');
  t.same(await health(), ['healthy', 'failed']);
  t.ok(await changedAt());

  // The agent lists the GPUs in another order: the verdict follows the UUID, not the index.
  t.same(await writeGpuVerdicts(db, machine.id, judgeReports([report(0, 'GPU-b', { remappedRows: { correctable: 0, uncorrectable: 9, pending: false, failure: true } }), report(1, 'GPU-a')], NOW)), []);
  t.same(await health(), ['healthy', 'failed']);

  const view = await machineGpuHealth(db, machine.id);
  t.match(view, { machine: { verdict: 'warning', reasons: ['GPU 1 failed: row remapping failed: the memory has no spare rows left; replace the GPU'] }, gpus: [{ index: 0, verdict: 'healthy' }, { index: 1, verdict: 'failed', report: null }] });
  t.equal(await machineGpuHealth(db, 'mach_nosuch'), null);

  // Another card in slot 1 (a new UUID) does not inherit the verdict; the same card keeps it.
  await db.query(`UPDATE machine_gpus SET busy = false, assignment_id = NULL WHERE machine_id = $1`, [machine.id]);
  await reconcileGpus(db, machine.id, [rows[0]!, { ...rows[1]!, vram_bytes: 81 * 2 ** 30 }]);
  t.same(await health(), ['healthy', 'failed'], 'same UUID: still failed');
  await reconcileGpus(db, machine.id, [rows[0]!, { ...rows[1]!, uuid: 'GPU-c' }]);
  t.same(await health(), ['healthy', 'healthy'], 'a new card starts healthy');

  // GPU 1 falls off the bus after its verdict freed it: the inventory leaves it out, the agent reports it lost.
  await writeGpuVerdicts(db, machine.id, judgeReports([report(0, 'GPU-a'), report(1, 'GPU-c', { lost: true, lostReason: 'Unknown Error' })], NOW));
  await reconcileGpus(db, machine.id, [rows[0]!], [1]);
  t.same(await health(), ['healthy', 'failed'], 'a lost GPU keeps its row and verdict');
  await reconcileGpus(db, machine.id, [rows[0]!]);
  t.same(await health(), ['healthy'], 'no longer reported at all: removed');
});

t.test('behavior: a heartbeat without reports is judged on the last ones with its live temperature', async (t) => {
  const last = [report(0, 'GPU-a'), report(1, 'GPU-b')];
  const live = [{ uuid: 'GPU-b', temperatureC: 90, utilizationPercent: 100 }];
  const judged = judgeReports(withLiveFigures(last, live), NOW);
  t.same(judged.map((j) => j.verdict), ['healthy', 'warning']);
  t.match(judged[1]!.reasons, [/^the temperature is at or above the slowdown threshold \(89 C\)/]);
  t.equal(last[1]!.temperatureC, 40, 'the last reports are left as sent');
});

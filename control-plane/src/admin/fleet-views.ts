import { GPU_HEALTH_VERDICTS, machineHealthVerdict } from '@gpufarm/shared';
import { decodeCursor, encodeCursor } from '../http/cursor.js';
import type { Database } from '../db/database.js';
import { machineGpuHealth } from '../fleet/gpu-health.js';
import { readFleetSeries } from '../fleet/history-store.js';
import { findMachineVerification, recentChallenges } from '../machine-verification/challenge-store.js';
import { machineStartTimes } from '../phases/figures.js';
import { z } from 'zod';
import { challengeView, gpuProofView } from './challenge-view.js';
import {
  countGpusByClassRegion,
  countJobsNow,
  countMachinesByState,
  findAdminMachine,
  listAdminMachines,
  listRecentMachineJobs,
  outcomesByFarm,
  queueWaitPercentiles,
  type AdminMachineDbRow,
  type AdminMachineSort,
  type AdminMachineState,
} from './store.js';

/** The admin area's read views, shaped as the fleet contract's JSON. */

export { MACHINE_STATES } from '@gpufarm/shared';
export const MACHINE_SORTS = ['heartbeat_age', 'utilization', 'failures'] as const satisfies readonly AdminMachineSort[];

const troubledGpusSchema = z.array(z.object({ index: z.int(), verdict: z.enum(GPU_HEALTH_VERDICTS), reasons: z.array(z.string()) })).nullable();

/** The reasons of a row's verdict, worded by the shared rule from its unhealthy status and troubled GPUs. */
function verdictReasons(r: AdminMachineDbRow): string[] {
  if (r.verdict === 'healthy') return [];
  const unhealthy = r.state === 'failed' && r.health_reason !== null ? r.health_reason : null;
  const gpus = troubledGpusSchema.catch(null).parse(r.troubled_gpus) ?? [];
  // Healthy GPUs are left out of the row: enough of them stand in so "no GPU is usable" is said only when true.
  const healthy = Array.from({ length: Math.max(0, r.gpu_count - gpus.length) }, () => ({ index: -1, verdict: 'healthy' as const, reasons: [] }));
  return machineHealthVerdict({ machineUnhealthyReason: unhealthy, gpus: [...gpus, ...healthy] }).reasons;
}

function machineRowView(r: AdminMachineDbRow) {
  return {
    id: r.id,
    farm: { id: r.farm_id, slug: r.farm_slug },
    regionKey: r.region_key,
    state: r.state,
    verdict: r.verdict,
    verdictReasons: verdictReasons(r),
    gpuCount: r.gpu_count,
    classIds: r.class_ids,
    agentVersion: r.agent_version,
    driverVersion: r.driver_version,
    lastHeartbeatAt: r.last_heartbeat_at?.toISOString() ?? null,
    heartbeatAgeSeconds: r.heartbeat_age_seconds === null ? null : Math.max(0, Math.round(r.heartbeat_age_seconds)),
    utilizationPercent: r.utilization_percent === null ? null : Math.round(r.utilization_percent * 10) / 10,
    failures7d: r.failures_7d,
    cordoned: r.cordoned,
    drainRequested: r.drain_requested,
    drainDeadline: r.drain_deadline?.toISOString() ?? null,
  };
}

// The cursor names the query it belongs to, so a cursor of another sort or filter is refused
// rather than paging the wrong list.
const machinesCursor = z.strictObject({ o: z.int().min(0), k: z.string() });

export async function adminMachinesPage(
  db: Database,
  query: {
    farm?: string | undefined; region?: string | undefined; class?: string | undefined; verdict?: 'healthy' | 'warning' | 'failed' | undefined;
    agentVersion?: string | undefined; driver?: string | undefined; state?: AdminMachineState | undefined; q?: string | undefined;
    sort: AdminMachineSort; order: 'asc' | 'desc'; limit: number; cursor?: string | undefined;
  },
) {
  const { cursor, limit, ...shape } = query;
  const key = JSON.stringify(shape);
  const offset = cursor === undefined ? 0 : decodeCursor(cursor, machinesCursor.refine((c) => c.k === key)).o;
  const { rows, total } = await listAdminMachines(db, {
    filter: {
      ...(query.farm ? { farmSlug: query.farm } : {}), ...(query.region ? { regionKey: query.region } : {}), ...(query.class ? { classId: query.class } : {}),
      ...(query.verdict ? { verdict: query.verdict } : {}), ...(query.agentVersion ? { agentVersion: query.agentVersion } : {}),
      ...(query.driver ? { driverVersion: query.driver } : {}), ...(query.state ? { state: query.state } : {}), ...(query.q ? { q: query.q } : {}),
    },
    sort: query.sort,
    order: query.order,
    limit,
    offset,
  });
  const next = offset + rows.length < total && rows.length === limit ? encodeCursor({ o: offset + rows.length, k: key }) : null;
  return { data: rows.map(machineRowView), nextCursor: next, total };
}

export async function adminMachineDetail(db: Database, machineId: string) {
  const row = await findAdminMachine(db, machineId);
  if (!row) return null;
  const [health, jobs, verification, challenges, startTimes] = await Promise.all([
    machineGpuHealth(db, machineId),
    listRecentMachineJobs(db, machineId, 20),
    findMachineVerification(db, machineId),
    recentChallenges(db, machineId, 10),
    machineStartTimes(db, machineId),
  ]);
  return {
    machine: { ...machineRowView(row), cudaVersion: row.cuda_version, benchmarkTier: row.benchmark_tier, pricePerGpuHourMicroUsd: row.price === null ? null : Number(row.price), healthReason: row.health_reason },
    gpus: (health?.gpus ?? []).map((g) => ({ index: g.index, uuid: g.uuid, classId: g.classId, verdict: g.verdict, reasons: g.reasons })),
    recentJobs: jobs.map((j) => ({ jobId: j.job_id, status: j.status, startedAt: j.started_at?.toISOString() ?? null, finishedAt: j.finished_at?.toISOString() ?? null, failureCode: j.failure_code })),
    gpuProof: verification === null ? null : gpuProofView(verification),
    challenges: challenges.map(challengeView),
    startTimes,
  };
}

export async function fleetOverview(db: Database, window: '24h' | '7d', nowMs = Date.now()) {
  const seconds = window === '24h' ? 86_400 : 7 * 86_400;
  const since = new Date(nowMs - seconds * 1000);
  const resolutionSeconds = window === '24h' ? 300 : 3600;
  const [machines, gpus, jobs, wait, outcomes, series] = await Promise.all([
    countMachinesByState(db),
    countGpusByClassRegion(db),
    countJobsNow(db),
    queueWaitPercentiles(db, since),
    outcomesByFarm(db, since),
    readFleetSeries(db, since, resolutionSeconds),
  ]);
  const round = (n: number | null) => (n === null ? null : Math.round(n * 10) / 10);
  return {
    machines,
    gpus: gpus.map((g) => ({ classId: g.class_id, regionKey: g.region_key, free: g.free, busy: g.busy })),
    jobs,
    queueWaitSeconds: { p50: round(wait.p50), p95: round(wait.p95) },
    // The matcher's pass times live in its metrics (`/metrics`), not in the database.
    matchingMs: { p50: null, p95: null },
    outcomesByFarm: outcomes.map((o) => {
      const ended = o.completed + o.failed + o.timed_out + o.canceled;
      return {
        farmId: o.farm_id, farmSlug: o.farm_slug, completed: o.completed, failed: o.failed, timedOut: o.timed_out, canceled: o.canceled,
        failureRateBps: ended === 0 ? 0 : Math.round(((o.failed + o.timed_out) * 10_000) / ended),
      };
    }),
    series: {
      resolutionSeconds,
      t: series.map((s) => s.t),
      machinesOnline: series.map((s) => s.machines_online),
      gpusBusy: series.map((s) => s.gpus_busy),
      jobsQueued: series.map((s) => s.jobs_queued),
      jobsRunning: series.map((s) => s.jobs_running),
    },
  };
}

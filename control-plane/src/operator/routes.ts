import { Readable } from 'node:stream';
import { ApiError, earningVerdict, errorForField, parseUsdToMicroUsd, type EarningVerdict, type MachineState } from '@gpufarm/shared';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { createEnrollmentToken, ENROLLMENT_TOKEN_TTL_SECONDS } from '../agent-gateway/enrollment.js';
import { setClassPrice, setMachinePrice } from '../agent-gateway/store.js';
import { HISTORY_RANGES, machineHistory } from '../admin/fleet-views.js';
import { OPERATOR_API_PREFIX } from '../auth/plugin.js';
import type { OperatorFarm } from '../auth/roles.js';
import type { OfferIndex } from '../capacity/offer-index.js';
import type { Config } from '../config.js';
import type { Database, Queryable } from '../db/database.js';
import { recordAudit, type AuditTargetType } from '../fleet/audit.js';
import { setMachineDrain } from '../fleet/drain.js';
import { decodeCursor, encodeCursor } from '../http/cursor.js';
import { intParam, parseBody, parseParams, parseQuery } from '../http/parse.js';
import { jobIdSchema } from '../ids.js';
import { withdrawalsOf } from '../jobs/deferred-payments.js';
import { waitingForFarms } from '../jobs/deferred-payments-store.js';
import { machineStartTimes } from '../phases/figures.js';
import { earningOfJob, earningsCsv, earningsPage, type LedgerScope } from './earnings.js';
import { goingPrices } from './market.js';
import { requestedImages } from './requested-images.js';
import {
  addFarmOperator,
  farmPricesByClass,
  findEnrollmentToken,
  findMachineFacts,
  ledgerJob,
  ledgerTotals,
  listEnrollmentTokens,
  listFarmOperators,
  listMachineFacts,
  operatorJobRuns,
  queuedJobsByClass,
  recentMachineJobs,
  removeFarmOperator,
  revokeEnrollmentToken,
  type EnrollmentTokenRow,
  type MachineFactsRow,
} from './store.js';

export interface OperatorRoutesOptions {
  db: Database;
  offerIndex: OfferIndex;
  config: Pick<Config, 'publicUrl'>;
}

const MACHINE_ID = z.string().regex(/^mach_[0-9a-z]{26}$/, 'is not a machine id');
const machineParams = z.object({ id: MACHINE_ID });
const jobParams = z.object({ id: jobIdSchema });
const tokenParams = z.object({ id: z.string().regex(/^enrt_[0-9a-z]{26}$/, 'is not an enrollment token id') });
const farmParams = z.object({ id: z.string().regex(/^farm_[0-9a-z]{26}$/, 'is not a farm id') });
const operatorParams = farmParams.extend({ wallet: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte hex address') });
const farmSlug = z.string().regex(/^[a-z0-9][a-z0-9-]{1,62}$/, 'must be a farm slug');
/** USD per GPU-hour as a decimal string (at most 6 decimals); null: not offered. */
const usdPrice = z.union([z.string(), z.number()]).nullable();

const listQuery = z.strictObject({ farm: farmSlug.optional(), limit: intParam(1, 500, 50), cursor: z.string().max(200).optional() });
const farmQuery = z.strictObject({ farm: farmSlug.optional() });
const requestedImagesQuery = z.strictObject({ farm: farmSlug.optional(), days: intParam(1, 30, 7), limit: intParam(1, 100, 20) });
const historyQuery = z.strictObject({ range: z.enum(HISTORY_RANGES, { message: `must be one of ${HISTORY_RANGES.join(', ')}` }).default('24h') });
const isoTime = z.iso.datetime({ offset: true, message: 'must be an ISO time such as 2026-11-01T00:00:00Z' });
const earningsQuery = z.strictObject({
  farm: farmSlug.optional(),
  from: isoTime.optional(),
  to: isoTime.optional(),
  groupBy: z.enum(['job', 'machine', 'day']).default('job'),
  limit: intParam(1, 500, 50),
  cursor: z.string().max(200).optional(),
});
const earningsCsvQuery = earningsQuery.omit({ limit: true, cursor: true });

const createTokenBody = z.strictObject({
  farm: farmSlug,
  regionKey: z.string().min(1).max(64),
  pricePerGpuHour: usdPrice,
  label: z.string().min(1).max(100).nullable().optional(),
  ttlSeconds: z.int().min(60).max(30 * 86_400).optional(),
});
const classPriceBody = z.strictObject({ farm: farmSlug, classId: z.string().min(1).max(64), pricePerGpuHour: usdPrice });
const machinePriceBody = z.strictObject({ pricePerGpuHour: usdPrice });
const drainBody = z.strictObject({ reason: z.string().min(1).max(500).nullable().optional() });
const operatorBody = z.strictObject({ wallet: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte hex address') });
const idCursor = z.object({ id: z.string() });

/** micro-USD of a USD price field; null stays null (not offered). */
function priceField(value: string | number | null, field = 'pricePerGpuHour'): number | null {
  if (value === null) return null;
  const parsed = parseUsdToMicroUsd(value);
  if (!parsed.ok || parsed.microUsd === 0) throw errorForField('invalid_request', field, parsed.ok ? 'must be more than 0' : parsed.message, { subject: true });
  return parsed.microUsd;
}

function iso(at: Date | null): string | null {
  return at === null ? null : new Date(at).toISOString();
}

/** The machine's state, as the admin table decides it (offline, failed, cordoned, draining or drained, busy, online). */
function machineState(m: MachineFactsRow): MachineState {
  if (m.status === 'offline' || m.status === 'disabled') return 'offline';
  if (m.status === 'unhealthy') return 'failed';
  if (m.cordoned) return 'cordoned';
  if (m.drainRequested || m.status === 'draining') return m.currentJobId ? 'draining' : 'drained';
  return m.currentJobId ? 'busy' : 'online';
}

/**
 * The GPUs the agent detected that are not offered, with why: the agent's reason (an old
 * generation, say), or that the control plane does not know the class it reported.
 */
export function notOfferedGpus(m: Pick<MachineFactsRow, 'gpus' | 'inventoryGpus'>): Array<{ index: number; name: string; reason: string }> {
  const offered = new Set(m.gpus.map((g) => g.index));
  return (m.inventoryGpus ?? [])
    .filter((g) => !offered.has(g.index))
    .map((g) => ({
      index: g.index,
      name: g.name,
      reason: g.notOfferedReason ?? (g.classId === null ? 'its model is not in the class catalog of the agent that reported it; upgrade gf-agent' : `the control plane does not know its class ${g.classId}; upgrade gf-agent`),
    }));
}

/** The verdict of a machine row, with the going prices of its classes. */
export function machineVerdict(m: MachineFactsRow, going: ReadonlyArray<{ classId: string; medianPerGpuHourMicroUsd: number | null }>): EarningVerdict {
  return earningVerdict({
    status: m.status,
    lastHeartbeatAt: iso(m.lastHeartbeatAt),
    offlineSince: iso(m.offlineSince),
    unenrolledAt: iso(m.unenrolledAt),
    healthReason: m.healthReason,
    probe: { state: m.probeState, output: m.probeOutput },
    gpus: m.gpus,
    driverVersion: m.driverVersion,
    pricePerGpuHourMicroUsd: m.pricePerGpuHourMicroUsd,
    drainRequested: m.drainRequested,
    drainSetBy: m.drainSetBy,
    cordoned: m.cordoned,
    farmStatus: m.farmStatus,
    verification: m.verification,
    verificationReason: m.verificationReason,
    currentJob: m.currentJobId ? { jobId: m.currentJobId, since: iso(m.currentJobSince) } : null,
    goingPrices: going,
    classes: m.gpus.map((g) => ({ classId: g.classId, label: g.label, architecture: g.architecture })),
    notOffered: notOfferedGpus(m),
  });
}

export function operatorMachineView(m: MachineFactsRow, going: ReadonlyArray<{ classId: string; medianPerGpuHourMicroUsd: number | null }>) {
  return {
    id: m.id,
    farm: { id: m.farmId, slug: m.farmSlug },
    regionKey: m.regionKey,
    state: machineState(m),
    earning: machineVerdict(m, going),
    gpus: m.gpus.map((g) => ({ index: g.index, classId: g.classId, label: g.label, verdict: g.verdict, reasons: g.reasons })),
    /** GPUs the agent detected but does not offer, each with why (never just a missing row). */
    notOfferedGpus: notOfferedGpus(m),
    pricePerGpuHourMicroUsd: m.pricePerGpuHourMicroUsd,
    agentVersion: m.agentVersion,
    driverVersion: m.driverVersion,
    cudaVersion: m.cudaVersion,
    benchmarkTier: m.benchmarkTier,
    /** Whether the machine's GPUs passed a GPU challenge and when; the reason when the last one failed. */
    gpuProof: { verification: m.verification, reason: m.verificationReason, simulated: m.simulated, provenAt: iso(m.provenAt) },
    lastHeartbeatAt: iso(m.lastHeartbeatAt),
    drainRequested: m.drainRequested || m.status === 'draining',
    currentJobId: m.currentJobId,
  };
}

function tokenView(t: EnrollmentTokenRow) {
  return {
    id: t.id,
    farmSlug: t.farmSlug,
    regionKey: t.regionKey,
    pricePerGpuHourMicroUsd: t.pricePerGpuHourMicroUsd,
    label: t.label,
    createdAt: iso(t.createdAt),
    expiresAt: iso(t.expiresAt),
    usedAt: iso(t.usedAt),
    machineId: t.machineId,
    revokedAt: iso(t.revokedAt),
  };
}

/**
 * The operator area's API under `/operator/api` (the session of a farm's payout wallet or of a
 * wallet the farm lists). Everything is scoped to the session's farms: another farm's machine,
 * token or earnings answers 404 `not_found`, as if it did not exist. Every write is recorded in
 * the audit log with the session's wallet. Adding and removing operator wallets is the payout
 * wallet's alone.
 */
export const operatorRoutes: FastifyPluginAsync<OperatorRoutesOptions> = async (app, { db, offerIndex, config }) => {
  const base = OPERATOR_API_PREFIX;
  const session = { config: { auth: 'operator_session' as const } };

  const farmsOf = (request: FastifyRequest): OperatorFarm[] => request.operatorFarms ?? [];
  const walletOf = (request: FastifyRequest): string => {
    if (!request.webSession) throw new Error('an operator route was reached without a session');
    return request.webSession.walletAddress;
  };
  /** The session's farms, or the one named by `farm` (404 when it is none of them). */
  const scope = (request: FastifyRequest, slug: string | undefined): OperatorFarm[] => {
    const farms = farmsOf(request);
    if (slug === undefined) return farms;
    const farm = farms.find((f) => f.slug === slug);
    if (!farm) throw new ApiError('not_found', `No farm ${slug}.`);
    return [farm];
  };
  const ids = (farms: readonly OperatorFarm[]) => farms.map((f) => f.id);
  /** Runs a write and records it in the audit log with the session's wallet, in one transaction. */
  const audited = <T>(
    request: FastifyRequest,
    entry: { action: string; targetType: AuditTargetType; targetId: string; details?: (result: T) => Record<string, unknown> },
    write: (tx: Queryable) => Promise<T>,
  ): Promise<T> =>
    db.transaction(async (tx) => {
      const result = await write(tx);
      await recordAudit(tx, { actor: { kind: 'operator_wallet', id: walletOf(request) }, action: entry.action, targetType: entry.targetType, targetId: entry.targetId, ...(entry.details ? { details: entry.details(result) } : {}) });
      return result;
    });
  const machineOf = async (request: FastifyRequest): Promise<MachineFactsRow> => {
    const { id } = parseParams(machineParams, request.params);
    const machine = await findMachineFacts(db, ids(farmsOf(request)), id);
    if (!machine) throw new ApiError('not_found', `No machine ${id}.`);
    return machine;
  };

  app.get(`${base}/machines`, session, async (request) => {
    const query = parseQuery(listQuery, request.query, 'GET /operator/api/machines');
    const after = query.cursor ? decodeCursor(query.cursor, idCursor).id : null;
    const rows = await listMachineFacts(db, { farmIds: ids(scope(request, query.farm)), afterId: after, limit: query.limit + 1 });
    const page = rows.slice(0, query.limit);
    const going = goingPrices(offerIndex.supply());
    return { data: page.map((m) => operatorMachineView(m, going)), nextCursor: rows.length > query.limit ? encodeCursor({ id: page.at(-1)!.id }) : null };
  });

  app.get(`${base}/machines/:id`, session, async (request) => {
    const machine = await machineOf(request);
    const { range } = parseQuery(historyQuery, request.query, 'GET /operator/api/machines/:id');
    const [recentJobs, history, startTimes] = await Promise.all([recentMachineJobs(db, machine.id), machineHistory(db, machine.id, range), machineStartTimes(db, machine.id)]);
    return {
      machine: operatorMachineView(machine, goingPrices(offerIndex.supply())),
      probe: { state: machine.probeState, output: machine.probeOutput },
      recentJobs: recentJobs.map((j) => ({ jobId: j.jobId, status: j.status, startedAt: iso(j.startedAt), finishedAt: iso(j.finishedAt), failureCode: j.failureCode })),
      startTimes,
      history,
    };
  });

  // A customer job that ran on the farms' machines: its runs there, result and earning.
  app.get(`${base}/jobs/:id`, session, async (request) => {
    const { id } = parseParams(jobParams, request.params);
    const farmIds = ids(farmsOf(request));
    const [runs, ledger] = await Promise.all([operatorJobRuns(db, farmIds, id), ledgerJob(db, farmIds, id)]);
    const job = runs[0];
    if (!job) throw new ApiError('not_found', `No job ${id} ran on your farms' machines.`);
    return {
      jobId: id,
      status: job.status,
      verificationLevel: job.verificationLevel,
      resultHash: job.resultHash,
      completionTxHash: job.completionTxHash,
      billableGpuSeconds: job.billableGpuSeconds,
      runs: runs.map((r) => ({
        attempt: r.attempt,
        machineId: r.machineId,
        gpuModel: r.gpuModel,
        gpuCount: r.gpuCount,
        pricePerGpuHourMicroUsd: Number(r.price),
        startedAt: iso(r.startedAt),
        finishedAt: iso(r.finishedAt),
        exitCode: r.exitCode,
        failureCode: r.failureCode,
        failureMessage: r.failureMessage,
        result: r.assignmentId === r.resultAssignmentId,
      })),
      earning: ledger ? earningOfJob(ledger) : null,
    };
  });

  app.get(`${base}/market`, session, async (request) => {
    const query = parseQuery(farmQuery, request.query, 'GET /operator/api/market');
    const farms = scope(request, query.farm);
    const [yours, queued] = await Promise.all([farmPricesByClass(db, ids(farms)), queuedJobsByClass(db)]);
    const going = new Map(goingPrices(offerIndex.supply()).map((g) => [g.classId, g]));
    return {
      data: yours.map(({ classId, minPrice }) => {
        const market = going.get(classId);
        return {
          classId,
          label: offerIndex.gpuClass(classId)?.label ?? classId,
          gpusOnline: market?.gpusOnline ?? 0,
          gpusBusy: market?.gpusBusy ?? 0,
          jobsQueued: queued.get(classId) ?? 0,
          minPerGpuHourMicroUsd: market?.minPerGpuHourMicroUsd ?? null,
          medianPerGpuHourMicroUsd: market?.medianPerGpuHourMicroUsd ?? null,
          maxPerGpuHourMicroUsd: market?.maxPerGpuHourMicroUsd ?? null,
          yourPricePerGpuHourMicroUsd: minPrice,
        };
      }),
    };
  });

  // The market's most requested images, with how many of the farms' machines hold each: what to pre-pull.
  app.get(`${base}/requested-images`, session, async (request) => {
    const query = parseQuery(requestedImagesQuery, request.query, 'GET /operator/api/requested-images');
    return requestedImages(db, { days: query.days, limit: query.limit, farmIds: ids(scope(request, query.farm)) });
  });

  app.get(`${base}/enrollment-tokens`, session, async (request) => {
    const query = parseQuery(listQuery, request.query, 'GET /operator/api/enrollment-tokens');
    const before = query.cursor ? decodeCursor(query.cursor, idCursor).id : null;
    const rows = await listEnrollmentTokens(db, { farmIds: ids(scope(request, query.farm)), beforeId: before, limit: query.limit + 1 });
    const page = rows.slice(0, query.limit);
    return { data: page.map(tokenView), nextCursor: rows.length > query.limit ? encodeCursor({ id: page.at(-1)!.id }) : null };
  });

  app.post(`${base}/enrollment-tokens`, session, async (request, reply) => {
    const body = parseBody(createTokenBody, request.body);
    const [farm] = scope(request, body.farm);
    const price = priceField(body.pricePerGpuHour);
    const created = await createEnrollmentToken(db, {
      farmSlug: farm!.slug,
      regionKey: body.regionKey,
      pricePerGpuHourMicroUsd: price,
      label: body.label ?? null,
      ttlSeconds: body.ttlSeconds ?? ENROLLMENT_TOKEN_TTL_SECONDS,
    });
    const row = await findEnrollmentToken(db, [farm!.id], created.id);
    if (!row) throw new Error(`enrollment token ${created.id} vanished after its creation`);
    await recordAudit(db, { actor: { kind: 'operator_wallet', id: walletOf(request) }, action: 'enrollment_token.create', targetType: 'enrollment_token', targetId: created.id, details: { farm: farm!.slug, regionKey: body.regionKey, pricePerGpuHourMicroUsd: price } });
    return reply.code(201).send({ token: created.token, enrollmentToken: tokenView(row), command: `gf-agent enroll --server ${config.publicUrl} --token ${created.token}` });
  });

  app.post(`${base}/enrollment-tokens/:id/revoke`, session, async (request) => {
    const { id } = parseParams(tokenParams, request.params);
    const token = await findEnrollmentToken(db, ids(farmsOf(request)), id);
    if (!token) throw new ApiError('not_found', `No enrollment token ${id}.`);
    await audited(request, { action: 'enrollment_token.revoke', targetType: 'enrollment_token', targetId: id }, (tx) => revokeEnrollmentToken(tx, id));
    return tokenView((await findEnrollmentToken(db, [token.farmId], id))!);
  });

  app.put(`${base}/prices`, session, async (request) => {
    const body = parseBody(classPriceBody, request.body);
    const [farm] = scope(request, body.farm);
    // Curated classes and the derived ones machines have reported.
    if (!offerIndex.gpuClass(body.classId)) throw errorForField('invalid_request', 'classId', `unknown GPU class ${body.classId}`, { subject: true });
    const price = priceField(body.pricePerGpuHour);
    const machines = await audited<string[]>(
      request,
      { action: 'price.set_class', targetType: 'price', targetId: `${farm!.slug}/${body.classId}`, details: (changed) => ({ pricePerGpuHourMicroUsd: price, machines: changed }) },
      (tx) => setClassPrice(tx, { farmId: farm!.id, classId: body.classId, price }),
    );
    return { farm: farm!.slug, classId: body.classId, machines: machines.length, pricePerGpuHourMicroUsd: price };
  });

  app.put(`${base}/machines/:id/price`, session, async (request) => {
    const { id } = parseParams(machineParams, request.params);
    const body = parseBody(machinePriceBody, request.body);
    const price = priceField(body.pricePerGpuHour);
    await audited(request, { action: 'price.set_machine', targetType: 'machine', targetId: id, details: () => ({ pricePerGpuHourMicroUsd: price }) }, async (tx) => {
      if (!(await setMachinePrice(tx, { farmIds: ids(farmsOf(request)), machineId: id, price }))) throw new ApiError('not_found', `No machine ${id}.`);
    });
    return { machineId: id, pricePerGpuHourMicroUsd: price };
  });

  // An operator's drain has no deadline: running jobs finish however long they take.
  for (const [action, drain] of [['drain', true], ['undrain', false]] as const) {
    app.post(`${base}/machines/:id/${action}`, session, async (request) => {
      const machine = await machineOf(request);
      const body = parseBody(drainBody, request.body ?? {});
      await setMachineDrain(db, { machineId: machine.id, drain, deadline: null, reason: body.reason ?? null, actor: { kind: 'operator_wallet', id: walletOf(request) } });
      const after = await findMachineFacts(db, [machine.farmId], machine.id);
      return operatorMachineView(after!, goingPrices(offerIndex.supply()));
    });
  }

  const ledgerScope = (request: FastifyRequest, query: { farm?: string | undefined; from?: string | undefined; to?: string | undefined }): LedgerScope => ({
    farmIds: ids(scope(request, query.farm)),
    from: query.from ? new Date(query.from) : null,
    to: query.to ? new Date(query.to) : null,
  });

  app.get(`${base}/earnings`, session, async (request) => {
    const query = parseQuery(earningsQuery, request.query, 'GET /operator/api/earnings');
    const ledger = ledgerScope(request, query);
    const [page, totals] = await Promise.all([earningsPage(db, ledger, { groupBy: query.groupBy, cursor: query.cursor, limit: query.limit }), ledgerTotals(db, ledger)]);
    return { object: 'list', data: page.data, nextCursor: page.nextCursor, totals };
  });

  // Streamed a page at a time: a ledger of any length is never held whole.
  app.get(`${base}/earnings.csv`, session, async (request, reply) => {
    const query = parseQuery(earningsCsvQuery, request.query, 'GET /operator/api/earnings.csv');
    const ledger = ledgerScope(request, query);
    return reply
      .header('content-type', 'text/csv; charset=utf-8; header=present')
      .header('content-disposition', `attachment; filename="earnings-${query.groupBy}.csv"`)
      .send(Readable.from(earningsCsv(db, ledger, query.groupBy)));
  });

  // Payouts the escrow holds for the farms' payout wallets: each wallet takes its own with withdraw(token).
  app.get(`${base}/withdrawals`, session, async (request) => {
    const query = parseQuery(farmQuery, request.query, 'GET /operator/api/withdrawals');
    return { data: withdrawalsOf(await waitingForFarms(db, ids(scope(request, query.farm)))) };
  });

  const payoutFarm = (request: FastifyRequest) => {
    const { id } = parseParams(farmParams, request.params);
    const farm = farmsOf(request).find((f) => f.id === id);
    if (!farm) throw new ApiError('not_found', `No farm ${id}.`);
    if (farm.role !== 'payout') throw new ApiError('forbidden', `Only the farm's payout wallet (${farm.payoutAddress}) adds and removes operator wallets.`);
    return farm;
  };

  app.get(`${base}/farms/:id/operators`, session, async (request) => {
    const { id } = parseParams(farmParams, request.params);
    const farm = farmsOf(request).find((f) => f.id === id);
    if (!farm) throw new ApiError('not_found', `No farm ${id}.`);
    return { data: (await listFarmOperators(db, farm.id)).map((o) => ({ wallet: o.wallet, addedAt: iso(o.addedAt) })) };
  });

  app.post(`${base}/farms/:id/operators`, session, async (request, reply) => {
    const farm = payoutFarm(request);
    const wallet = parseBody(operatorBody, request.body).wallet.toLowerCase();
    if (wallet === farm.payoutAddress) throw errorForField('invalid_request', 'wallet', 'is the farm\'s payout wallet, which runs the farm already', { subject: true });
    const added = await audited(request, { action: 'farm_operator.add', targetType: 'farm_operator', targetId: `${farm.id}/${wallet}`, details: () => ({ farm: farm.slug, wallet }) }, (tx) => addFarmOperator(tx, farm.id, wallet));
    return reply.code(added ? 201 : 200).send({ farmId: farm.id, wallet });
  });

  app.delete(`${base}/farms/:id/operators/:wallet`, session, async (request, reply) => {
    const farm = payoutFarm(request);
    const wallet = parseParams(operatorParams, request.params).wallet.toLowerCase();
    await audited(request, { action: 'farm_operator.remove', targetType: 'farm_operator', targetId: `${farm.id}/${wallet}`, details: () => ({ farm: farm.slug, wallet }) }, async (tx) => {
      if (!(await removeFarmOperator(tx, farm.id, wallet))) throw new ApiError('not_found', `The wallet ${wallet} is no operator of ${farm.slug}.`);
    });
    return reply.code(204).send();
  });
};

import { ApiError } from '@gpufarm/shared';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { Hex } from 'viem';
import { z } from 'zod';
import { readEscrowJob } from '../chain/escrow.js';
import { apiKeyParams } from '../auth/api-keys.js';
import type { BlobStore } from '../artifacts/blob-store.js';
import { artifactLink, goneError, isExpired, SIGNED_URL_TTL_SECONDS } from '../artifacts/metadata.js';
import { artifactParams } from '../artifacts/routes.js';
import type { UrlSigner } from '../artifacts/signing.js';
import { findArtifactById } from '../artifacts/store.js';
import { ADMIN_API_PREFIX } from '../auth/plugin.js';
import { deleteAccountWebSessions } from '../auth/session-store.js';
import { revokeApiKey, setAccountStatus } from '../auth/store.js';
import type { Database } from '../db/database.js';
import { listAudit, recordAudit, type AuditActor } from '../fleet/audit.js';
import { setFarmQuarantine } from '../farms/quarantine.js';
import { setMachineCordon, setMachineDrain, type MachineDrainState } from '../machines/drain.js';
import { FLEET_EVENT_TYPES, listFleetEvents, type FleetEventType } from '../fleet/events.js';
import { decodeCursor, encodeCursor } from '../http/cursor.js';
import { parseBody, parseParams, parseQuery } from '../http/parse.js';
import type { EscrowDeps } from '../jobs/funding.js';
import { resolveJobDispute } from './disputes.js';
import { adminJobView } from './job-view.js';
import { HISTORY_RANGES, machineHistory } from '../machines/history.js';
import { adminMachineDetail, adminMachinesPage, fleetOverview, MACHINE_SORTS, MACHINE_STATES } from './fleet-views.js';
import { listAdminAccounts, listAdminFarms, listDisputes } from './store.js';

/**
 * The admin area's API (`/admin/api`, a session of a wallet in `GF_ADMIN_WALLETS`): the fleet's
 * overview, machines, events and audit log, and the actions on machines, farms, disputes,
 * accounts and keys. Each write is recorded in the audit log with the session's wallet.
 */

const machineParams = z.strictObject({ id: z.string().regex(/^mach_[0-9a-z]{26}$/, 'is not a machine id') });
const farmParams: typeof machineParams = z.strictObject({ id: z.string().regex(/^farm_[0-9a-z]{26}$/, 'is not a farm id') });
const accountParams = z.strictObject({ id: z.string().regex(/^acct_[0-9a-z]{26}$/, 'is not an account id') });
const jobParams = z.strictObject({ id: z.string().regex(/^job_[0-9a-z]{26}$/, 'is not a job id') });

const reason = z.string().trim().min(1, 'must not be empty').max(500).nullable().optional();
const drainBody = z.strictObject({ deadline: z.iso.datetime({ offset: true, message: 'must be an ISO 8601 time with its offset, or null' }).nullable().optional(), reason });
const reasonBody = z.strictObject({ reason });
const emptyBody = z.strictObject({}).nullable().optional();
const resolveBody = z.strictObject({ outcome: z.enum(['release', 'refund'], { message: "must be 'release' or 'refund'" }) });

const limit = z.coerce.number({ message: 'must be an integer from 1 to 500' }).int('must be an integer from 1 to 500').min(1, 'must be an integer from 1 to 500').max(500, 'must be an integer from 1 to 500').default(50);
const timeCursor = z.strictObject({ at: z.string(), id: z.string().regex(/^\d+$/) });
const eventsQuery = z.strictObject({
  type: z.string().optional(),
  machine: z.string().regex(/^mach_[0-9a-z]{26}$/, 'is not a machine id').optional(),
  farm: z.string().max(64).optional(),
  limit,
  cursor: z.string().optional(),
});
const auditQuery = z.strictObject({ limit, cursor: z.string().optional() });
const accountsQuery = z.strictObject({ wallet: z.string().regex(/^0x[0-9a-fA-F]{40}$/, 'must be a 0x-prefixed 20-byte hex address').optional(), limit });
const machinesQuery = z.strictObject({
  farm: z.string().max(64).optional(),
  region: z.string().max(64).optional(),
  class: z.string().max(64).optional(),
  verdict: z.enum(['healthy', 'warning', 'failed'], { message: 'must be healthy, warning or failed' }).optional(),
  agentVersion: z.string().max(64).optional(),
  driver: z.string().max(64).optional(),
  state: z.enum(MACHINE_STATES, { message: `must be one of ${MACHINE_STATES.join(', ')}` }).optional(),
  q: z.string().max(100).optional(),
  sort: z.enum(MACHINE_SORTS, { message: `must be one of ${MACHINE_SORTS.join(', ')}` }).default('heartbeat_age'),
  order: z.enum(['asc', 'desc'], { message: 'must be asc or desc' }).default('desc'),
  limit,
  cursor: z.string().optional(),
});
const overviewQuery = z.strictObject({ window: z.enum(['24h', '7d'], { message: 'must be 24h or 7d' }).default('24h') });
const historyQuery = z.strictObject({ range: z.enum(HISTORY_RANGES, { message: `must be one of ${HISTORY_RANGES.join(', ')}` }).default('24h') });

function drainView(state: MachineDrainState) {
  return { machineId: state.machineId, drainRequested: state.drainRequested, drainSetBy: state.drainSetBy, drainDeadline: state.drainDeadline?.toISOString() ?? null, drainReason: state.drainReason, cordoned: state.cordoned };
}

function eventTypes(raw: string | undefined): FleetEventType[] | undefined {
  if (raw === undefined) return undefined;
  const types = raw.split(',').map((t) => t.trim()).filter((t) => t !== '');
  const known: readonly string[] = FLEET_EVENT_TYPES;
  const unknown = types.filter((t) => !known.includes(t));
  if (unknown.length > 0) {
    throw new ApiError('invalid_request', `type: unknown event type ${unknown.join(', ')} (known: ${FLEET_EVENT_TYPES.join(', ')})`, {
      details: [{ field: 'type', message: `type: unknown event type ${unknown.join(', ')}` }],
    });
  }
  return types as FleetEventType[];
}

export interface AdminSessionRoutesOptions {
  db: Database;
  escrow: EscrowDeps | null;
  /** For the job view's links and timeline. */
  publicUrl: string;
  chainId: number;
  /** For an artifact's signed URL (the admin's download of a job's output or log). */
  artifacts: { blobs: BlobStore; signer: UrlSigner };
}

export const adminSessionRoutes: FastifyPluginAsync<AdminSessionRoutesOptions> = async (app, { db, escrow, publicUrl, chainId, artifacts }) => {
  const read = { config: { auth: 'admin_session' as const } };
  const write = read;
  const base = ADMIN_API_PREFIX;
  const actorOf = (request: FastifyRequest): AuditActor => {
    if (!request.webSession) throw new Error('an admin_session route ran without a session');
    return { kind: 'admin_wallet', id: request.webSession.walletAddress };
  };

  app.get(`${base}/fleet/overview`, read, async (request) => {
    const { window } = parseQuery(overviewQuery, request.query, `GET ${base}/fleet/overview`);
    return fleetOverview(db, window);
  });

  app.get(`${base}/machines`, read, async (request) => {
    const query = parseQuery(machinesQuery, request.query, `GET ${base}/machines`);
    return adminMachinesPage(db, query);
  });

  app.get(`${base}/machines/:id`, read, async (request) => {
    const { id } = parseParams(machineParams, request.params);
    const detail = await adminMachineDetail(db, id);
    if (!detail) throw new ApiError('not_found', `No machine ${id}.`);
    return detail;
  });

  app.get(`${base}/machines/:id/history`, read, async (request) => {
    const { id } = parseParams(machineParams, request.params);
    const { range } = parseQuery(historyQuery, request.query, `GET ${base}/machines/:id/history`);
    const history = await machineHistory(db, id, range);
    if (!history) throw new ApiError('not_found', `No machine ${id}.`);
    return history;
  });

  app.get(`${base}/events`, read, async (request) => {
    const query = parseQuery(eventsQuery, request.query, `GET ${base}/events`);
    const after = query.cursor === undefined ? null : decodeCursor(query.cursor, timeCursor);
    let farmId: string | undefined;
    if (query.farm !== undefined) {
      farmId = (await listAdminFarms(db)).find((f) => f.id === query.farm || f.slug === query.farm)?.id;
      if (!farmId) return { data: [], nextCursor: null };
    }
    const types = eventTypes(query.type);
    const page = await listFleetEvents(db, { limit: query.limit, after, ...(types ? { types } : {}), ...(query.machine ? { machineId: query.machine } : {}), ...(farmId ? { farmId } : {}) });
    return { data: page.events, nextCursor: page.next ? encodeCursor(page.next) : null };
  });

  app.get(`${base}/audit`, read, async (request) => {
    const query = parseQuery(auditQuery, request.query, `GET ${base}/audit`);
    const after = query.cursor === undefined ? null : decodeCursor(query.cursor, timeCursor);
    const page = await listAudit(db, { limit: query.limit, after });
    return { data: page.entries, nextCursor: page.next ? encodeCursor(page.next) : null };
  });

  app.get(`${base}/farms`, read, async () => ({
    data: (await listAdminFarms(db)).map((f) => ({
      id: f.id, slug: f.slug, name: f.name, status: f.status === 'active' ? 'active' : 'quarantined', quarantineReason: f.quarantine_reason, machines: f.machines, payoutAddress: f.payout_address,
    })),
  }));

  app.get(`${base}/disputes`, read, async () => {
    const rows = await listDisputes(db);
    // Disputes are few: the escrow's own record gives the provider, deposit, payout and fee as it will pay them.
    const onChain = escrow ? await Promise.all(rows.map((d) => readEscrowJob(escrow.chain, d.job_key as Hex).catch(() => null))) : rows.map(() => null);
    return {
      data: rows.map((d, i) => {
        const e = onChain[i];
        return {
          jobId: d.job_id, jobKey: d.job_key, customer: d.customer, provider: e ? e.provider.toLowerCase() : d.provider, token: d.token, symbol: d.symbol, decimals: d.decimals,
          amount: e ? e.amount.toString() : d.amount, payout: e ? e.payout.toString() : d.payout, fee: e ? e.fee.toString() : null, disputedAt: d.disputed_at?.toISOString() ?? null,
          // Past it the admin can no longer resolve: the escrow worker returns the whole deposit to the customer.
          disputeEndsAt: d.dispute_ends_at?.toISOString() ?? null,
          reason: d.dispute_reason,
          evidence: d.dispute_evidence,
        };
      }),
    };
  });

  app.get(`${base}/accounts`, read, async (request) => {
    const query = parseQuery(accountsQuery, request.query, `GET ${base}/accounts`);
    const rows = await listAdminAccounts(db, { wallet: query.wallet?.toLowerCase() ?? null, limit: query.limit });
    return {
      data: rows.map((a) => ({
        id: a.id, walletAddress: a.wallet_address, status: a.status, createdAt: a.created_at.toISOString(),
        keys: a.keys.map((k) => ({ id: k.id, prefix: `gf_${k.environment}_…${k.last_four}`, label: k.label, revokedAt: k.revoked_at === null ? null : new Date(k.revoked_at).toISOString() })),
      })),
    };
  });

  // Each action and its undo: `on` takes `{reason}` (drain also `deadline`), `off` an empty body.
  const toggles: Array<{ on: string; off: string; params: typeof machineParams; what: string; act: (id: string, on: boolean, body: z.infer<typeof drainBody>, actor: AuditActor) => Promise<object | null> }> = [
    {
      on: 'machines/:id/drain', off: 'machines/:id/undrain', params: machineParams, what: 'machine',
      act: async (id, drain, body, actor) => {
        const state = await setMachineDrain(db, { machineId: id, drain, deadline: body.deadline ? new Date(body.deadline) : null, reason: body.reason ?? null, actor });
        return state && drainView(state);
      },
    },
    {
      on: 'machines/:id/cordon', off: 'machines/:id/uncordon', params: machineParams, what: 'machine',
      act: async (id, cordon, body, actor) => {
        const state = await setMachineCordon(db, { machineId: id, cordon, reason: body.reason ?? null, actor });
        return state && drainView(state);
      },
    },
    {
      on: 'farms/:id/quarantine', off: 'farms/:id/unquarantine', params: farmParams, what: 'farm',
      act: (id, quarantine, body, actor) => setFarmQuarantine(db, { farmId: id, quarantine, reason: body.reason ?? null, actor }),
    },
  ];
  for (const toggle of toggles) {
    for (const on of [true, false]) {
      app.post(`${base}/${on ? toggle.on : toggle.off}`, write, async (request) => {
        const { id } = parseParams(toggle.params, request.params);
        const body = on ? parseBody(toggle.on.endsWith('drain') ? drainBody : reasonBody, request.body ?? {}) : (parseBody(emptyBody, request.body), {});
        const result = await toggle.act(id, on, body, actorOf(request));
        if (!result) throw new ApiError('not_found', `No ${toggle.what} ${id}.`);
        return result;
      });
    }
  }

  // Any account's job, for the admin deciding its dispute: the job, its timeline, log and outputs.
  app.get(`${base}/jobs/:id`, read, async (request, reply) => {
    const { id } = parseParams(jobParams, request.params);
    reply.header('Cache-Control', 'no-store');
    return adminJobView(db, { jobId: id, publicUrl, chainId });
  });

  // One of a job's artifacts (its output or log): a 302 to a signed URL, as for its customer;
  // reading a customer's files is recorded in the audit log.
  app.get(`${base}/artifacts/:id`, read, async (request, reply) => {
    const { id } = parseParams(artifactParams, request.params);
    const row = await findArtifactById(db, id);
    if (!row || row.job_id === null) throw new ApiError('not_found', `No job artifact ${id}.`);
    if (isExpired(row)) throw goneError(row);
    await recordAudit(db, { actor: actorOf(request), action: 'job.read_artifact', targetType: 'job', targetId: row.job_id, details: { artifactId: row.id, kind: row.kind } });
    const link = await artifactLink(row, artifacts, SIGNED_URL_TTL_SECONDS);
    reply.header('Cache-Control', 'no-store');
    reply.header('X-Artifact-Sha256', row.sha256);
    return reply.redirect(link.url, 302);
  });

  app.post(`${base}/jobs/:id/resolve-dispute`, write, async (request) => {
    const { id } = parseParams(jobParams, request.params);
    const { outcome } = parseBody(resolveBody, request.body);
    return resolveJobDispute({ db, escrow }, { jobId: id, outcome, actor: actorOf(request) });
  });

  for (const [action, status] of [['suspend', 'suspended'], ['reactivate', 'active']] as const) {
    app.post(`${base}/accounts/:id/${action}`, write, async (request) => {
      const { id } = parseParams(accountParams, request.params);
      const body = action === 'suspend' ? parseBody(reasonBody, request.body ?? {}) : (parseBody(emptyBody, request.body), { reason: null });
      const ended = await db.transaction(async (tx) => {
        if (!(await setAccountStatus(tx, id, status))) return null;
        // A suspended account's browsers are signed out at once, not at their session's expiry.
        const sessions = status === 'suspended' ? await deleteAccountWebSessions(tx, id) : 0;
        await recordAudit(tx, { actor: actorOf(request), action: `account.${action}`, targetType: 'account', targetId: id, details: { reason: body.reason ?? null, sessionsEnded: sessions } });
        return sessions;
      });
      if (ended === null) throw new ApiError('not_found', `No account ${id}.`);
      return { id, status, sessionsEnded: ended };
    });
  }

  app.post(`${base}/keys/:id/revoke`, write, async (request) => {
    const { id } = parseParams(apiKeyParams, request.params);
    parseBody(emptyBody, request.body);
    const revoked = await db.transaction(async (tx) => {
      const key = await revokeApiKey(tx, id);
      if (key) await recordAudit(tx, { actor: actorOf(request), action: 'api_key.revoke', targetType: 'api_key', targetId: id });
      return key;
    });
    if (!revoked) throw new ApiError('not_found', `No API key ${id}.`);
    return { id, revokedAt: revoked.revokedAt?.toISOString() ?? null };
  });
};

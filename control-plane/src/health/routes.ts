import type { FastifyPluginAsync } from 'fastify';
import type { OfferIndex } from '../capacity/offer-index.js';
import type { Queryable } from '../db/database.js';
import type { EscrowDeps } from '../jobs/funding.js';
import { pingDatabase } from './store.js';

/** A database that has not answered `SELECT 1` within this counts as down: a balancer's probe must not hang. */
export const READY_DB_TIMEOUT_MS = 2_000;

export interface HealthRoutesOptions {
  db: Queryable;
  offerIndex: Pick<OfferIndex, 'loadedAt'>;
  /** The escrow's chain; null: no chain configured, so none is checked. */
  escrow: Pick<EscrowDeps, 'health'> | null;
  dbTimeoutMs?: number;
}

/** One readiness check: passed, or why not. */
export type ReadyCheck = { ok: true } | { ok: false; reason: string };

/**
 * Probes for load balancers, outside `/v1` and its document: `GET /healthz` answers 200 while the
 * process serves HTTP (nothing else is consulted, so a database outage does not get every
 * replica restarted); `GET /readyz` answers 200 when the database answers, the chain RPC answers
 * (when a chain is configured) and the offer index holds its first snapshot, else 503 naming
 * each failing check. Neither needs a credential nor counts against a rate limit.
 */
export const healthRoutes: FastifyPluginAsync<HealthRoutesOptions> = async (app, options) => {
  const config = { auth: 'public', probe: true } as const;
  app.get('/healthz', { config }, async (_request, reply) => reply.header('Cache-Control', 'no-store').send({ status: 'ok' }));
  app.get('/readyz', { config }, async (_request, reply) => {
    const checks: Record<string, ReadyCheck> = {
      database: await databaseCheck(options.db, options.dbTimeoutMs ?? READY_DB_TIMEOUT_MS),
      offerIndex: options.offerIndex.loadedAt !== null ? { ok: true } : { ok: false, reason: 'the offer index has not loaded its first snapshot' },
    };
    if (options.escrow) checks.chain = chainCheck(options.escrow);
    const failing = Object.entries(checks).filter(([, check]) => !check.ok).map(([name]) => name);
    return reply
      .code(failing.length === 0 ? 200 : 503)
      .header('Cache-Control', 'no-store')
      .send({ status: failing.length === 0 ? 'ready' : 'not_ready', failing, checks });
  });
};

async function databaseCheck(db: Queryable, timeoutMs: number): Promise<ReadyCheck> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<ReadyCheck>((resolve) => {
    timer = setTimeout(() => resolve({ ok: false, reason: `the database did not answer within ${timeoutMs} ms` }), timeoutMs);
  });
  try {
    return await Promise.race([
      pingDatabase(db).then((): ReadyCheck => ({ ok: true }), (): ReadyCheck => ({ ok: false, reason: 'the database refused the query or cannot be reached' })),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The chain counts as reachable when its RPC answers; a wrong chain id or a missing escrow is a
 * configuration fault that funding reports itself (`fundingUnavailable`), not a reason to take
 * the replica out of the balancer.
 */
function chainCheck(escrow: Pick<EscrowDeps, 'health'>): ReadyCheck {
  const state = escrow.health.current();
  return state.ok || state.code !== 'chain_unavailable' ? { ok: true } : { ok: false, reason: state.message };
}

import type { Database, Queryable } from '../db/database.js';
import { insertAudit, type AuditActor, type AuditTargetType } from './audit-store.js';

/**
 * The audit log: who did what to which object, appended by every admin (and operator) write and
 * never changed (a trigger refuses UPDATE and DELETE). Read newest first (`listAudit`).
 */

export type { AuditActor, AuditEntry, AuditTargetType, TimeCursor } from './audit-store.js';
export { listAudit } from './audit-store.js';

/** Appends one entry; inside the caller's transaction when `db` is one, so the action and its record commit together. */
export async function recordAudit(
  db: Queryable,
  entry: { actor: AuditActor; action: string; targetType: AuditTargetType; targetId: string; details?: Record<string, unknown> },
): Promise<void> {
  await insertAudit(db, entry);
}

/** The actor in words, for event messages (`admin wallet 0x…`). */
export function describeActor(actor: AuditActor): string {
  return `${actor.kind.replace('_', ' ')} ${actor.id}`;
}

/** Runs a write and records it in the audit log, in one transaction; `details` may read the write's result. */
export function audited<T>(
  db: Database,
  entry: { actor: AuditActor; action: string; targetType: AuditTargetType; targetId: string; details?: (result: T) => Record<string, unknown> },
  write: (tx: Queryable) => Promise<T>,
): Promise<T> {
  return db.transaction(async (tx) => {
    const result = await write(tx);
    await recordAudit(tx, { actor: entry.actor, action: entry.action, targetType: entry.targetType, targetId: entry.targetId, ...(entry.details ? { details: entry.details(result) } : {}) });
    return result;
  });
}

import type { Queryable } from '../db/database.js';
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

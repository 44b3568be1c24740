import type { Queryable } from '../db/database.js';

/** The audit log's SQL (`audit.ts` is its interface). */

export type AuditActor = { kind: 'admin_wallet' | 'operator_wallet' | 'admin_token' | 'machine'; id: string };

export type AuditTargetType = 'machine' | 'farm' | 'account' | 'api_key' | 'job' | 'enrollment_token' | 'price' | 'farm_operator';

export interface AuditEntry {
  id: string;
  at: string;
  actor: AuditActor;
  action: string;
  targetType: AuditTargetType;
  targetId: string;
  details: Record<string, unknown>;
}

export async function insertAudit(
  db: Queryable,
  entry: { actor: AuditActor; action: string; targetType: AuditTargetType; targetId: string; details?: Record<string, unknown> },
): Promise<void> {
  await db.query(
    'INSERT INTO audit_log (actor_kind, actor_id, action, target_type, target_id, details) VALUES ($1, $2, $3, $4, $5, $6::jsonb)',
    [entry.actor.kind, entry.actor.id, entry.action, entry.targetType, entry.targetId, JSON.stringify(entry.details ?? {})],
  );
}

/** Where a page of a newest-first list starts: after the row at `at` with `id`. */
export interface TimeCursor {
  at: string;
  id: string;
}

interface AuditRow {
  id: string;
  at: Date;
  actor_kind: AuditActor['kind'];
  actor_id: string;
  action: string;
  target_type: AuditTargetType;
  target_id: string;
  details: Record<string, unknown>;
}

/** A page of the audit log, newest first; `next` is where the following page starts, or null. */
export async function listAudit(
  db: Queryable,
  params: { limit: number; after: TimeCursor | null; targetType?: AuditTargetType; targetId?: string },
): Promise<{ entries: AuditEntry[]; next: TimeCursor | null }> {
  const rows = await db.query<AuditRow>(
    `SELECT id::text, at, actor_kind, actor_id, action, target_type, target_id, details FROM audit_log
      WHERE ($1::timestamptz IS NULL OR (at, id) < ($1::timestamptz, $2::bigint))
        AND ($3::text IS NULL OR (target_type = $3 AND target_id = $4))
      ORDER BY at DESC, id DESC LIMIT $5`,
    [params.after?.at ?? null, params.after?.id ?? null, params.targetType ?? null, params.targetId ?? null, params.limit + 1],
  );
  const page = rows.slice(0, params.limit);
  const entries = page.map((r) => ({
    id: r.id,
    at: r.at.toISOString(),
    actor: { kind: r.actor_kind, id: r.actor_id },
    action: r.action,
    targetType: r.target_type,
    targetId: r.target_id,
    details: r.details,
  }));
  const last = entries[entries.length - 1];
  return { entries, next: rows.length > params.limit && last ? { at: last.at, id: last.id } : null };
}

import type { JobCreateRequest } from '@gpufarm/shared';
import { lockAccount } from '../auth/store.js';
import type { Database, Queryable } from '../db/database.js';

export interface TemplateRow {
  name: string;
  description: string | null;
  spec: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'name, description, spec, created_at, updated_at';

/** The account's templates, by name. */
export function listTemplates(db: Queryable, accountId: string): Promise<TemplateRow[]> {
  return db.query<TemplateRow>(`SELECT ${COLUMNS} FROM job_templates WHERE account_id = $1 ORDER BY name`, [accountId]);
}

export async function findTemplate(db: Queryable, accountId: string, name: string): Promise<TemplateRow | null> {
  const [row] = await db.query<TemplateRow>(`SELECT ${COLUMNS} FROM job_templates WHERE account_id = $1 AND name = $2`, [accountId, name]);
  return row ?? null;
}

export type SaveOutcome = { kind: 'created' | 'replaced'; row: TemplateRow } | { kind: 'taken' } | { kind: 'full' };

/**
 * Saves a template under its name: replaces one of that name (`taken` instead when `createOnly`),
 * or adds it while the account holds fewer than `maxPerAccount` (`full` otherwise). Under the
 * account's row lock, so two saves at once cannot both pass the count.
 */
export function saveTemplate(
  db: Database,
  params: { accountId: string; name: string; description: string | null; spec: JobCreateRequest; createOnly: boolean; maxPerAccount: number },
): Promise<SaveOutcome> {
  return db.transaction(async (tx) => {
    await lockAccount(tx, params.accountId);
    const existing = await findTemplate(tx, params.accountId, params.name);
    if (existing && params.createOnly) return { kind: 'taken' };
    if (!existing) {
      const [row] = await tx.query<{ count: number }>('SELECT count(*)::int AS count FROM job_templates WHERE account_id = $1', [params.accountId]);
      if ((row?.count ?? 0) >= params.maxPerAccount) return { kind: 'full' };
    }
    const [saved] = await tx.query<TemplateRow>(
      `INSERT INTO job_templates (account_id, name, description, spec) VALUES ($1, $2, $3, $4::jsonb)
       ON CONFLICT (account_id, name) DO UPDATE SET description = EXCLUDED.description, spec = EXCLUDED.spec, updated_at = now()
       RETURNING ${COLUMNS}`,
      [params.accountId, params.name, params.description, JSON.stringify(params.spec)],
    );
    if (!saved) throw new Error(`saving template ${params.name} returned no row`);
    return { kind: existing ? 'replaced' : 'created', row: saved };
  });
}

/** Deletes the account's template; false when it has none of that name. */
export async function deleteTemplate(db: Queryable, accountId: string, name: string): Promise<boolean> {
  const rows = await db.query('DELETE FROM job_templates WHERE account_id = $1 AND name = $2 RETURNING name', [accountId, name]);
  return rows.length > 0;
}

import { MACHINE_STATE_RULES, MACHINE_VERDICT_RULES, type MachineFact } from '@gpufarm/shared';

/**
 * A machine's state and verdict in SQL, written from the shared rules (`MACHINE_STATE_RULES`,
 * `MACHINE_VERDICT_RULES`) so the database filters, sorts and counts by the very rule the views
 * apply to one row. The expressions read `m` (a `machines` row) and `g` (its `MACHINE_GPU_FACTS`
 * row, null when it has no GPU).
 */

/** Per machine: its GPUs, whether any is reserved, how many are failed, how many warn or failed. */
export const MACHINE_GPU_FACTS = `
  SELECT machine_id, count(*)::int AS gpu_count, bool_or(busy) AS busy,
         count(*) FILTER (WHERE health = 'failed')::int AS failed_gpus,
         count(*) FILTER (WHERE health <> 'healthy')::int AS troubled_gpus
    FROM machine_gpus GROUP BY machine_id`;

/** Each fact as `MACHINE_FACT_TESTS` reads it, over `m` and `g`. */
const FACT_SQL: Readonly<Record<MachineFact, string>> = {
  offline: `m.status IN ('offline', 'disabled')`,
  unusable: `(m.status = 'unhealthy' OR coalesce(g.failed_gpus >= g.gpu_count, true))`,
  cordoned: 'm.cordoned',
  drain: `(m.drain_requested OR m.status = 'draining')`,
  busy: 'coalesce(g.busy, false)',
  troubled: 'coalesce(g.troubled_gpus > 0, false)',
};

function caseOf(rules: ReadonlyArray<readonly [string, readonly MachineFact[]]>): string {
  const whens = rules.map(([answer, facts]) => (facts.length === 0 ? `ELSE '${answer}'` : `WHEN ${facts.map((f) => FACT_SQL[f]).join(' AND ')} THEN '${answer}'`));
  return `CASE ${whens.join(' ')} END`;
}

/** `machineState` over `m` and `g`. */
export const MACHINE_STATE_SQL = caseOf(MACHINE_STATE_RULES);
/** `machineVerdict` over `m` and `g`. */
export const MACHINE_VERDICT_SQL = caseOf(MACHINE_VERDICT_RULES);

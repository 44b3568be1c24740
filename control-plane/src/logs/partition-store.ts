import type { Queryable } from '../db/database.js';

/** The day partitions of `log_lines` (migration 011), named `log_lines_pYYYYMMDD` by their UTC day. */

const PARTITION_NAME = /^log_lines_p(\d{4})(\d{2})(\d{2})$/;

/** The day partitions of `log_lines`: name and UTC day (YYYY-MM-DD). */
export async function listDayPartitions(db: Queryable): Promise<Array<{ name: string; day: string }>> {
  const rows = await db.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'log_lines'::regclass`,
  );
  return rows.flatMap((r) => {
    const m = PARTITION_NAME.exec(r.name);
    return m ? [{ name: r.name, day: `${m[1]}-${m[2]}-${m[3]}` }] : [];
  });
}

/** The partition name of the UTC day `day` (YYYY-MM-DD). */
export function dayPartitionName(day: string): string {
  return `log_lines_p${day.replaceAll('-', '')}`;
}

/**
 * Creates the partition of the UTC day `day` (YYYY-MM-DD) unless it exists; false when the
 * default partition already holds lines of that day, which then stay there.
 */
export async function createDayPartition(db: Queryable, day: string): Promise<boolean> {
  const [row] = await db.query<{ made: boolean }>('SELECT create_log_lines_partition($1::date) AS made', [day]);
  return row?.made === true;
}

/** Drops the partition of the UTC day `day` (YYYY-MM-DD) with every line in it. */
export async function dropDayPartition(db: Queryable, day: string): Promise<void> {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day)) return;
  // Checked above: the name is letters, digits and an underscore.
  await db.query(`DROP TABLE IF EXISTS ${dayPartitionName(day)}`);
}

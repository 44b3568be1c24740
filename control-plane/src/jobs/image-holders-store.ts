import type { Queryable } from '../db/database.js';

/**
 * How many online machines hold an image by name (`machine_images`, written by the gateway's
 * image store), for the job estimate's assumptions.
 */
export async function countOnlineHolders(db: Queryable, imageKey: string): Promise<number> {
  const [row] = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM machine_images i JOIN machines m ON m.id = i.machine_id
     WHERE i.image_names @> ARRAY[$1]::text[] AND m.status = 'online'`,
    [imageKey],
  );
  return row?.n ?? 0;
}

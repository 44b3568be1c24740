import type { Database } from './database.js';

/** The holders of each lock name in this process, for PGlite (one connection, one process). */
const localLocks = new WeakMap<Database, Map<string, Promise<unknown>>>();

/** Longest pause between two tries of a lock another replica holds. */
const MAX_RETRY_MS = 250;

/**
 * Runs `fn` while holding the lock `name`, shared by every replica on the database: on
 * PostgreSQL a transaction-scoped advisory lock held by a transaction that does nothing else
 * (`fn` writes through `db` as usual, so its writes commit as it goes); a replica that dies
 * ends its session and the lock with it. A waiter tries again after a pause instead of blocking
 * in the server, so waiters hold no connection the holder's own statements need. PGlite serves
 * one process, so an in-process queue stands in for the lock there. `wait: false` answers
 * `{ ran: false }` at once when another holder has it.
 */
export async function withAdvisoryLock<T>(db: Database, name: string, fn: () => Promise<T>, options: { wait?: boolean } = {}): Promise<{ ran: true; value: T } | { ran: false }> {
  const wait = options.wait ?? true;
  if (db.kind === 'pglite') return withLocalLock(db, name, fn, wait);
  for (let pauseMs = 10; ; pauseMs = Math.min(pauseMs * 2, MAX_RETRY_MS)) {
    const attempt = await db.transaction(async (tx) => {
      const [row] = await tx.query<{ locked: boolean }>('SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS locked', [name]);
      if (!row?.locked) return { ran: false as const };
      return { ran: true as const, value: await fn() };
    });
    if (attempt.ran || !wait) return attempt;
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
}

async function withLocalLock<T>(db: Database, name: string, fn: () => Promise<T>, wait: boolean): Promise<{ ran: true; value: T } | { ran: false }> {
  let held = localLocks.get(db);
  if (!held) localLocks.set(db, (held = new Map()));
  const before = held.get(name);
  if (before && !wait) return { ran: false };
  const run = (before ?? Promise.resolve()).catch(() => {}).then(fn);
  const tail = run.catch(() => {});
  held.set(name, tail);
  try {
    return { ran: true, value: await run };
  } finally {
    if (held.get(name) === tail) held.delete(name);
  }
}

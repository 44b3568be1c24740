import t from 'tap';
import { createPostgresTestDatabase } from './helpers/database.js';
import { isDatabaseUnavailable } from '../src/db/errors.js';

t.test('LISTEN survives a dropped connection: re-listened, and the handler told to reload', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const received: string[] = [];
  let wake: () => void = () => {};
  await db.listen('probe_channel', (payload) => {
    received.push(payload);
    wake();
  });
  const next = () => new Promise<void>((resolve) => (wake = resolve));

  let arrived = next();
  await db.query(`SELECT pg_notify('probe_channel', 'one')`);
  await arrived;
  t.same(received, ['one']);

  arrived = next();
  // The server ends the listening connection, as a restart or a network cut would.
  await db.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                   WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE 'LISTEN%'`);
  await arrived;
  t.same(received, ['one', ''], 'an empty notification after the reconnect');

  arrived = next();
  await db.query(`SELECT pg_notify('probe_channel', 'two')`);
  await arrived;
  t.same(received, ['one', '', 'two'], 'notifications flow again');
});

t.test('error: unavailable, not a crash, when the server ends a transaction\'s connection between two of its statements', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const failure = await db
    .transaction(async (tx) => {
      const [row] = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      // The server ends the connection while the transaction waits on other work (a restart's
      // fast shutdown does this to every connection); pg reports it on the idle client.
      await db.query('SELECT pg_terminate_backend($1)', [row!.pid]);
      await new Promise((r) => setTimeout(r, 500));
      return tx.query('SELECT 1');
    })
    .then(
      () => null,
      (err: unknown) => err,
    );
  t.ok(isDatabaseUnavailable(failure), `the transaction fails as unavailable: ${String(failure)}`);
  t.same(await db.query('SELECT 1 AS one'), [{ one: 1 }], 'the pool serves the next query');
});

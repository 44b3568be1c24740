import t from 'tap';
import { createPostgresTestDatabase } from './helpers/database.js';

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

import t from 'tap';
import { withAdvisoryLock } from '../src/db/advisory-lock.js';
import { openPostgres } from '../src/db/postgres.js';
import { BACKENDS } from './helpers/database.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

for (const [name, create] of BACKENDS) {
  t.test(`behavior on ${name}: holders of one name take turns, across pools on PostgreSQL; other names run beside them`, async (t) => {
    const { db, url } = await create(t);
    const other = url ? openPostgres(url) : db;
    if (url) t.teardown(() => other.close());
    const events: string[] = [];
    const hold = (label: string, on = db) =>
      withAdvisoryLock(on, 'test lock', async () => {
        events.push(`${label} in`);
        await sleep(100);
        events.push(`${label} out`);
        return label;
      });
    // Held from the moment its callback runs until the checks below are done: a new pool
    // connection may take longer than any fixed hold (a 150 ms hold ran out under CI load).
    let entered: () => void = () => {};
    const inside = new Promise<void>((resolve) => (entered = resolve));
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    const busy = withAdvisoryLock(db, 'test lock', async () => {
      entered();
      await released;
    });
    await inside;
    t.same(await withAdvisoryLock(other, 'test lock', async () => 'ran', { wait: false }), { ran: false }, 'wait: false answers at once while it is held');
    t.same(await withAdvisoryLock(other, 'another lock', async () => 'ran', { wait: false }), { ran: true, value: 'ran' }, 'another name is free');
    release();
    await busy;

    const results = await Promise.all([hold('a'), hold('b', other), hold('c')]);
    t.same(results.map((r) => r.ran && r.value), ['a', 'b', 'c']);
    for (let i = 0; i < events.length; i += 2) t.equal(events[i + 1], events[i]!.replace(' in', ' out'), 'no holder entered while another was in');

    await t.rejects(withAdvisoryLock(db, 'test lock', async () => Promise.reject(new Error('boom'))), /boom/);
    t.same(await withAdvisoryLock(other, 'test lock', async () => 'after', { wait: false }), { ran: true, value: 'after' }, 'a holder that threw let go');
  });
}

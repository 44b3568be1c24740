import { spawn } from 'node:child_process';
import t from 'tap';
import { ownChild } from '../src/process/owned-child.js';

t.test('behavior: a child that cannot be spawned settles exited instead of throwing; stop does not hang', async (t) => {
  const owned = ownChild(spawn('/nonexistent/gf-no-such-binary', [], { stdio: 'ignore' }));
  t.same(await owned.exited, { code: null, signal: null }, 'exited resolves on the spawn error');
  t.equal(owned.running(), false);
  await owned.stop();
  t.pass('stop resolved');
});

t.test('behavior: stop sends SIGTERM to a running child and resolves once it exited', async (t) => {
  const listenersBefore = process.listeners('exit').length;
  const owned = ownChild(spawn('sleep', ['30'], { stdio: 'ignore' }));
  t.equal(owned.running(), true);
  t.equal(process.listeners('exit').length, listenersBefore + 1, 'it is killed if this process exits');
  await owned.stop();
  t.same(await owned.exited, { code: null, signal: 'SIGTERM' });
  t.equal(owned.running(), false);
  t.equal(process.listeners('exit').length, listenersBefore, 'no exit listener left behind');
});

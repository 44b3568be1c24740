import { existsSync } from 'node:fs';
import t from 'tap';
import type { AssignmentSpec } from '@gpufarm/shared';
import { listEgress, removeEgress } from '../src/egress/network.js';
import { jobHooks, runPoststops, runPreruns, type HookStep, type JobHook, type JobSetup } from '../src/runtime/hooks/index.js';
import { busyboxSpec, busyboxWithUser, collectLines, docker, localImages, testRuntime } from './helpers/docker.js';

/**
 * A start's steps as hooks (`runtime/hooks/`): the runner's order and cleanup, and on the real
 * Docker Engine, a start that fails late leaves nothing of any step behind.
 */

/** Hooks that record what ran; `fail` names the preruns and poststops that throw. */
function recorder(fail: { prerun?: string[]; poststop?: string[] } = {}): { ran: string[]; hook: (name: string, ms?: number) => JobHook } {
  const ran: string[] = [];
  const hook = (name: string, ms = 0): JobHook => ({
    name,
    async prerun() {
      ran.push(`prerun ${name}`);
      await new Promise((resolve) => setTimeout(resolve, ms));
      if (fail.prerun?.includes(name)) throw new Error(`${name} failed`);
      ran.push(`ready ${name}`);
    },
    async poststop() {
      ran.push(`poststop ${name}`);
      if (fail.poststop?.includes(name)) throw new Error(`${name} cleanup failed`);
    },
  });
  return { ran, hook };
}

const job = (): JobSetup => ({ assignmentId: 'a', dir: '/nonexistent', name: 'n', spec: busyboxSpec(), sink: () => undefined });

t.test('behavior: preruns run in order, a group together, and none is undone when all succeed', async (t) => {
  const { ran, hook } = recorder();
  await runPreruns([hook('a'), [hook('b', 20), hook('c')], hook('d')], job());
  t.same(ran, ['prerun a', 'ready a', 'prerun b', 'prerun c', 'ready c', 'ready b', 'prerun d', 'ready d']);
});

t.test('behavior: a failed prerun undoes itself and every step begun before it, last first, and its error is thrown', async (t) => {
  const { ran, hook } = recorder({ prerun: ['c'], poststop: ['b'] });
  const steps: HookStep[] = [hook('a'), hook('b'), hook('c'), hook('d')];
  await t.rejects(runPreruns(steps, job()), { message: 'c failed' }, "a cleanup's own error does not hide the step's");
  t.same(ran, ['prerun a', 'ready a', 'prerun b', 'ready b', 'prerun c', 'poststop c', 'poststop b', 'poststop a'], 'd never ran; the failed step cleans up its part too');
});

t.test('behavior: a group that fails throws its first failure in its own order once both settled, and both are undone', async (t) => {
  const { ran, hook } = recorder({ prerun: ['b', 'c'] });
  await t.rejects(runPreruns([hook('a'), [hook('b', 20), hook('c')]], job()), { message: 'b failed' });
  t.same(ran, ['prerun a', 'ready a', 'prerun b', 'prerun c', 'poststop c', 'poststop b', 'poststop a']);
});

t.test('behavior: runPoststops undoes every step last first, and stops at the first error unless told to go on', async (t) => {
  const strict = recorder({ poststop: ['c'] });
  await t.rejects(runPoststops([strict.hook('a'), [strict.hook('b'), strict.hook('c')], strict.hook('d')], job()), { message: 'c cleanup failed' });
  t.same(strict.ran, ['poststop d', 'poststop c']);
  const lenient = recorder({ poststop: ['c'] });
  await runPoststops([lenient.hook('a'), [lenient.hook('b'), lenient.hook('c')], lenient.hook('d')], job(), { ignoreErrors: true });
  t.same(lenient.ran, ['poststop d', 'poststop c', 'poststop b', 'poststop a']);
});

t.test('default: the runtime starts a job in this order', async (t) => {
  const runtime = testRuntime(t);
  const names = jobHooks(runtime.deps, { now: Date.now, logKeepBytes: 1024 }).map((s) => (Array.isArray(s) ? (s as JobHook[]).map((h) => h.name) : (s as JobHook).name));
  t.same(names, ['folder', 'log', 'output', ['image', 'inputs'], 'egress', 'container', 'user', 'start']);
});

t.test('behavior: an allowlist start that fails after its network and container were made leaves nothing: no container, proxy, network or folder', async (t) => {
  const image = await busyboxWithUser(t, { user: 'ghost' });
  const runtime = testRuntime(t, {
    machine: { simulated: true, cpuCores: 2, ramBytes: 4 * 1024 ** 3, egress: { image: localImages().egressProxy.reference } },
  });
  const spec: AssignmentSpec = busyboxSpec({ image: image.repository, imageDigest: image.digest, networkPolicy: { mode: 'allowlist', allow: ['allowed.example.com'] } });
  // Should the start leave them, the proxy and network go anyway (the runtime's teardown removes containers only).
  t.teardown(() => removeEgress(docker, runtime.deps.owner, spec.assignmentId));
  const { sink, of } = collectLines();
  await t.rejects(runtime.start(spec, sink), { code: 'create_failed', message: /the image's USER ghost is not in its \/etc\/passwd/ });
  t.ok(of('system').some((line) => line.startsWith('egress proxy ')), 'the proxy was up before the start failed');
  t.same(await runtime.listContainers(), [], 'no job container');
  const egress = await listEgress(docker, runtime.deps.owner, spec.assignmentId);
  t.same(egress.proxies, [], 'no proxy');
  t.same(egress.networks, [], 'no network');
  t.notOk(existsSync(runtime.dirOf(spec.assignmentId)), 'no folder');
});

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { LOG_LEVELS, type ImageCacheReport } from '@gpufarm/shared';
import { gfAgent } from './helpers/cli.js';
import { e2eAgent, finished, spec, until, type E2eAgent } from './helpers/e2e.js';
import { docker, imagePresent, localImages, pushRandomImage, type LocalImage } from './helpers/docker.js';

/**
 * The image cache through `gf-agent run` on real Docker and the local registry: images of
 * busybox (about 2 MB, on the machine already) and one layer of random bytes each, pulled by
 * digest. Budgets are set in bytes so that the sizes decide.
 */
const MB = 1_000_000;
const images = {} as { a: LocalImage; b: LocalImage; c: LocalImage };

t.before(async () => {
  // Built once for the file; each test leaves the machine without local copies.
  const parent = t;
  [images.a, images.b, images.c] = await Promise.all([pushRandomImage(parent, 2 * MB), pushRandomImage(parent, 3 * MB), pushRandomImage(parent, 4 * MB)]);
});

// Each test starts from a machine without them (its agent and containers are gone by then).
t.afterEach(async () => {
  for (const image of Object.values(images)) await docker.getImage(image.reference).remove().catch(() => undefined);
});

/** The latest image report the agent sent in a heartbeat. */
function lastReport(agent: E2eAgent): ImageCacheReport | null {
  const beats = agent.peer.messages('heartbeat').filter((h) => h.images !== undefined);
  return beats.at(-1)?.images ?? null;
}
const listed = (report: ImageCacheReport | null, image: LocalImage) => report?.images.some((i) => i.repoDigests.includes(image.reference)) ?? false;

t.test('behavior: the pre-pull list is pulled at start within the budget and reported', async (t) => {
  // a (busybox + 2 MB) fits 6.5 MB; c (busybox + 4 MB) would alone, but not beside a: skipped, never pulled.
  const agent = await e2eAgent(t, { GF_AGENT_IMAGE_CACHE_BYTES: String(6.5 * MB), GF_AGENT_PREPULL_IMAGES: `${images.a.reference}, ${images.c.reference}` });
  const proc = agent.start();
  await agent.peer.waitFor(() => listed(lastReport(agent), images.a), 'a heartbeat reports the pre-pulled image', 30_000);
  await agent.peer.waitFor(() => proc.messages().some((m) => m.startsWith(`pre-pull: skipped ${images.c.reference}`)), 'the image over the budget is skipped');
  t.equal(await imagePresent(images.a.reference), true, 'pulled');
  t.equal(await imagePresent(images.c.reference), false, 'never pulled past the budget');
  const pulled = new RegExp(`pre-pull: pulled ${images.a.reference.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} in \\d+ ms`);
  t.ok(proc.messages().some((m) => pulled.test(m)), `the pull's progress is logged: ${proc.messages().join('\n')}`);
  const skipped = /does not fit this machine's image cache budget \(image_cache_bytes, 6\.2 MiB\) beside the [\d.]+ MiB that running and assigned jobs' images and the cached images take/;
  t.match(proc.lines().find((l) => skipped.test(l.msg)), { level: LOG_LEVELS.warn, machineId: agent.machineId }, 'the skip is a warning of the machine');
  const report = lastReport(agent)!;
  t.equal(report.budgetBytes, 6.5 * MB);
  t.ok(report.usedBytes > 3.9 * MB && report.usedBytes < 4.2 * MB, `busybox and 2 MB counted once each (${report.usedBytes})`);
  t.equal(report.images.length, 1, 'only the image it pulled: the machine\'s busybox is the operator\'s');
  const status = await gfAgent(['status'], agent.env);
  t.match(status.stdout, /^image cache: 1 image, 3\.\d MiB of 6\.2 MiB \(image_cache_bytes\)$/m, '`gf-agent status` says what the cache holds');
  const index = JSON.parse(readFileSync(join(agent.stateDir, 'image-cache.json'), 'utf8')) as { images: Array<{ source: string; references: string[] }> };
  t.match(index.images, [{ source: 'prepull', references: [images.a.reference] }], 'the index in the state dir');

  // A job naming the machine's own busybox by tag: pulled again (a tag may move), unchanged, and left the operator's.
  const { busybox } = localImages();
  const tagged = `${busybox.repository}:latest`;
  if (!(await imagePresent(tagged))) await docker.getImage(busybox.reference).tag({ repo: busybox.repository, tag: 'latest' });
  const job = spec({ image: tagged, imageDigest: null, gpus: [] });
  agent.peer.assign(job);
  t.equal((await finished(agent, job.assignmentId)).state, 'finished');
  const after = JSON.parse(readFileSync(join(agent.stateDir, 'image-cache.json'), 'utf8')) as { images: Array<{ references: string[] }> };
  t.same(after.images.map((i) => i.references), [[images.a.reference]], 'the operator\'s image did not join the cache');
  t.equal(await imagePresent(tagged), true);
  t.same(agent.peer.invalid, []);
});

t.test('behavior: eviction keeps running jobs\' images and the budget; a pull past it is refused before it starts', async (t) => {
  // 9.6 MB: busybox (2) + a (2) + b (3) fit; with c (4) one of them must go.
  const agent = await e2eAgent(t, { GF_AGENT_IMAGE_CACHE_BYTES: String(9.6 * MB) });
  const proc = agent.start();
  const { peer } = agent;
  t.teardown(() => {
    if (!t.passing()) t.comment(proc.output());
  });
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');
  const job = (image: LocalImage, command: string[]) => spec({ image: image.repository, imageDigest: image.digest, gpus: [], command, maxRuntimeSeconds: 600 });

  const first = job(images.a, ['sleep', '600']);
  peer.assign(first);
  await peer.waitFor(() => peer.statuses(first.assignmentId).some((s) => s.state === 'running'), 'a runs', 30_000);
  await peer.waitFor(() => listed(lastReport(agent), images.a), 'the report lists a');

  const second = job(images.b, ['true']);
  peer.assign(second);
  t.equal((await finished(agent, second.assignmentId)).state, 'finished', 'b fits beside a');
  // Its container goes once the server has every line; until then it holds b (Docker refuses to remove it).
  await until(async () => (await agent.container(second.assignmentId)) === null, 'b\'s container removed');
  await peer.waitFor(() => listed(lastReport(agent), images.b), 'the report lists b');

  // c needs room: b is the one no job needs (a, used longer ago, runs).
  const third = job(images.c, ['sleep', '600']);
  peer.assign(third);
  await peer.waitFor(() => peer.statuses(third.assignmentId).some((s) => s.state === 'running'), 'c runs', 30_000);
  t.equal(await imagePresent(images.b.reference), false, 'b, least recently used among the idle, was evicted');
  t.equal(await imagePresent(images.a.reference), true, 'a, older but running, stays');
  await peer.waitFor(() => listed(lastReport(agent), images.c) && !listed(lastReport(agent), images.b), 'the report changed: c in, b out');
  const report = lastReport(agent)!;
  t.ok(report.usedBytes <= 9.6 * MB, `within the budget (${report.usedBytes})`);
  t.equal(report.images.length, 2);

  // b again: a and c run, and b does not fit beside them.
  const fourth = job(images.b, ['true']);
  peer.assign(fourth);
  await peer.waitFor(() => peer.messages('assignment.rejected').some((m) => m.assignmentId === fourth.assignmentId), 'b is refused');
  const rejected = peer.messages('assignment.rejected').find((m) => m.assignmentId === fourth.assignmentId)!;
  t.equal(rejected.reason, 'image_cache_full');
  t.match(rejected.message, /^the image \S+ \([\d.]+ MiB on disk\) does not fit this machine's image cache budget \(image_cache_bytes, 9\.2 MiB\) beside the [\d.]+ MiB that running and assigned jobs' images take$/);
  t.equal(await imagePresent(images.b.reference), false, 'nothing was pulled');
  t.equal(peer.statuses(fourth.assignmentId).length, 0, 'no status: the job never started');

  peer.send({ type: 'cancel', assignmentId: first.assignmentId, reason: 'test over' });
  peer.send({ type: 'cancel', assignmentId: third.assignmentId, reason: 'test over' });
  await finished(agent, first.assignmentId);
  await finished(agent, third.assignmentId);
  // Nothing changes the cache any more: once a heartbeat goes without the report, none carries it.
  await peer.waitFor(() => peer.messages('heartbeat').at(-1)?.images === undefined, 'a heartbeat without the report');
  const settled = peer.messages('heartbeat').length;
  await peer.waitFor(() => peer.messages('heartbeat').length >= settled + 2, 'two more heartbeats');
  t.equal(peer.messages('heartbeat').slice(settled).filter((h) => h.images !== undefined).length, 0, 'the report goes only when the cache changed');
  t.ok(peer.messages('heartbeat')[0]!.images, 'the first heartbeat after welcome carries it');
  t.same(peer.invalid, []);
  t.notOk(proc.messages().some((m) => /could not remove/.test(m)), 'no removal failed');
});

t.test('behavior: with a server before protocol 8 no report is sent and image_cache_full goes as not_ready', async (t) => {
  const agent = await e2eAgent(t, { GF_AGENT_IMAGE_CACHE_BYTES: String(1 * MB) }, { versions: [1, 2, 3, 4, 5, 6, 7] });
  agent.start();
  const { peer } = agent;
  await peer.waitFor(() => peer.messages('heartbeat').length >= 1, 'a heartbeat');
  const job = spec({ image: images.a.repository, imageDigest: images.a.digest, gpus: [] });
  peer.assign(job);
  await peer.waitFor(() => peer.messages('assignment.rejected').length === 1, 'refused');
  t.match(peer.messages('assignment.rejected')[0], { assignmentId: job.assignmentId, reason: 'not_ready', message: /more than this machine's image cache budget \(image_cache_bytes, 976\.6 KiB\)$/ });
  t.equal(peer.messages('heartbeat').filter((h) => h.images !== undefined).length, 0, 'no heartbeat carries images');
  t.equal(await imagePresent(images.a.reference), false, 'nothing was pulled');
  t.same(peer.invalid, [], 'every message was one protocol 7 knows');
});

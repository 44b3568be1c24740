import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { canaryResult } from '@gpufarm/shared/node';
import { ensureImage, parseImageReference } from '../src/docker/image.js';
import { RuntimeError } from '../src/job/errors.js';
import { busyboxSpec, collectLines, docker, localImages, testRuntime, uniqueName } from './helpers/docker.js';

const run = promisify(execFile);
const images = localImages();

t.test('args: image references', async (t) => {
  t.same(parseImageReference('127.0.0.1:5000/gpufarm/canary'), { repository: '127.0.0.1:5000/gpufarm/canary', tag: null, digest: null });
  t.same(parseImageReference('127.0.0.1:5000/a/b:1.2'), { repository: '127.0.0.1:5000/a/b', tag: '1.2', digest: null });
  const d = `sha256:${'a'.repeat(64)}`;
  t.same(parseImageReference(`ghcr.io/acme/x:1@${d}`), { repository: 'ghcr.io/acme/x', tag: '1', digest: d });
  t.throws(() => parseImageReference('x@sha256:zz'), RuntimeError);
});

t.test('behavior: pull by digest from the registry when no local image carries the digest', async (t) => {
  // A repository of our own in the registry, so removing it locally touches no other test.
  const repo = `gpufarm/pulltest-${uniqueName('r')}`;
  const tagged = `${images.registry}/${repo}:t`;
  await run('docker', ['tag', images.busybox.reference, tagged]);
  await run('docker', ['push', tagged]);
  const head = await fetch(`http://${images.registry}/v2/${repo}/manifests/t`, { method: 'HEAD', headers: { accept: 'application/vnd.docker.distribution.manifest.v2+json' } });
  const digest = head.headers.get('docker-content-digest')!;
  t.match(digest, /^sha256:[a-f0-9]{64}$/);
  const pinned = `${images.registry}/${repo}@${digest}`;
  t.teardown(async () => {
    await run('docker', ['rmi', tagged]).catch(() => undefined);
    await run('docker', ['rmi', pinned]).catch(() => undefined);
    await fetch(`http://${images.registry}/v2/${repo}/manifests/${digest}`, { method: 'DELETE' }).catch(() => undefined);
  });
  // Untagging the only tag of the repository drops its digest reference too.
  await run('docker', ['rmi', tagged]);
  await run('docker', ['rmi', pinned]).catch(() => undefined);
  const gone = await docker.getImage(pinned).inspect().then(() => 200, (err: { statusCode?: number }) => err.statusCode);
  t.equal(gone, 404, 'no local image carries the digest');

  const progress: string[] = [];
  const resolved = await ensureImage(docker, `${images.registry}/${repo}`, digest, (l) => progress.push(l));
  t.equal(resolved.reference, pinned);
  t.equal(resolved.pulled, true);
  t.ok(progress.some((l) => l.startsWith(`pulling ${pinned}`)), 'progress names the pull');
  t.match(progress.at(-1), new RegExp(`^pulled ${pinned.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} in \\d+ ms: no layer to fetch: the machine holds every one$`), 'the last line sums the pull: the busybox layer was on the machine (the image under its own name)');
  const info = await docker.getImage(pinned).inspect();
  t.ok(info.RepoDigests.includes(pinned));

  // Second time: the local image carries the digest, no pull.
  const again = await ensureImage(docker, `${images.registry}/${repo}:t`, digest, () => undefined);
  t.equal(again.pulled, false);
});

t.test('behavior: a pull that fetches a layer reports layers done, bytes of the known total and the rate', async (t) => {
  // An image of our own: busybox (held) and a 3 MB layer of random bytes only the registry has.
  const repo = `gpufarm/pulltest-${uniqueName('p')}`;
  const tagged = `${images.registry}/${repo}:t`;
  const dir = await mkdtemp(join(tmpdir(), 'gf-pull-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'Dockerfile'), `FROM ${images.busybox.reference}\nRUN head -c 3000000 /dev/urandom > /blob\n`);
  await run('docker', ['build', '-q', '-t', tagged, dir]);
  await run('docker', ['push', tagged]);
  const digest = (await run('docker', ['inspect', '--format', '{{index .RepoDigests 0}}', tagged])).stdout.trim().split('@')[1]!;
  const pinned = `${images.registry}/${repo}@${digest}`;
  t.teardown(async () => {
    await run('docker', ['rmi', '-f', tagged, pinned]).catch(() => undefined);
    await fetch(`http://${images.registry}/v2/${repo}/manifests/${digest}`, { method: 'DELETE' }).catch(() => undefined);
  });
  await run('docker', ['rmi', tagged]);
  const progress: string[] = [];
  const resolved = await ensureImage(docker, `${images.registry}/${repo}`, digest, (l) => progress.push(l));
  t.equal(resolved.pulled, true);
  t.match(progress.at(-1), /^pulled \S+ in \d+ ms: 2 of 2 layers done, (2\.[89]|3\.0) MiB of (2\.[89]|3\.0) MiB \(100 %\) fetched, [\d.]+ (B|KiB|MiB|GiB)\/s$/, `the last line sums the pull: ${progress.join(' | ')}`);
});

t.test('error: digest_mismatch when the reference names another digest than the pin', async (t) => {
  await t.rejects(ensureImage(docker, images.canary.reference, images.busybox.digest, () => undefined), { code: 'digest_mismatch' });
});

t.test('error: pull_failed for a pinned digest the repository does not hold', async (t) => {
  await t.rejects(ensureImage(docker, images.canary.repository, images.busybox.digest, () => undefined), { code: 'pull_failed' });
});

t.test('behavior: a local tag of the same name pointing elsewhere is not run', async (t) => {
  // An imposter: busybox tagged locally under the canary's repository.
  const imposter = `${images.canary.repository}:${uniqueName('imposter')}`;
  await run('docker', ['tag', images.busybox.reference, imposter]);
  t.teardown(() => run('docker', ['rmi', imposter]).catch(() => undefined));
  const runtime = testRuntime(t);
  const { sink } = collectLines();
  const spec = busyboxSpec({ image: imposter, imageDigest: images.canary.digest, command: ['sha256-chain', '5'] });
  const job = await runtime.start(spec, sink);
  t.equal(job.imageDigest, images.canary.digest);
  const exit = await job.done;
  t.equal(exit.exitCode, 0);
  t.equal(await readFile(join(job.outputDir, 'result.txt'), 'utf8'), canaryResult(spec.jobId, 5), 'the canary ran, not busybox');
});

t.test('behavior: the canary writes sha256^n(GF_JOB_ID) over raw digests', async (t) => {
  const runtime = testRuntime(t);
  const spec = busyboxSpec({ image: images.canary.repository, imageDigest: images.canary.digest, command: ['sha256-chain', '100000'] });
  const job = await runtime.start(spec, collectLines().sink);
  const exit = await job.done;
  t.equal(exit.exitCode, 0);
  t.equal(await readFile(join(job.outputDir, 'result.txt'), 'utf8'), canaryResult(spec.jobId, 100000));
});

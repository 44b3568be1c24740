import { generateKeyPairSync } from 'node:crypto';
import { Readable } from 'node:stream';
import t, { type Test } from 'tap';
import tar from 'tar-stream';
import type { AssignmentSpec } from '@gpufarm/shared';
import { collectResults } from '../src/artifacts/results.js';
import { readContainerFile } from '../src/runtime/container-files.js';
import type { DockerRuntime } from '../src/runtime/docker-runtime.js';
import { busyboxSpec, busyboxWithUser, collectLines, docker, testRuntime, uploadSink } from './helpers/docker.js';

/** Bits of the capabilities a job never holds (linux/capability.h). */
const DROPPED = { CHOWN: 0, DAC_OVERRIDE: 1, FOWNER: 3, SETGID: 6, SETUID: 7 } as const;
const machineKey = generateKeyPairSync('ed25519').privateKey;

/**
 * What the job reports about itself: its ids, its capability sets, who owns /output, and the
 * outcome of each thing it may not do. Each probe prints one line.
 */
function probe(other: string): string {
  return [
    'id',
    'grep -E "^Cap(Eff|Bnd)" /proc/self/status',
    "stat -c 'output %u:%g %a' /output",
    'echo result-bytes > /output/result.txt && echo output-written',
    `touch /output/mine && (chown ${other} /output/mine 2>/dev/null && echo CHOWNED || echo chown-refused)`,
    `(su -s /bin/sh -c id ${other === '0:0' ? 'root' : 'nobody'} </dev/null >/dev/null 2>&1 && echo SU || echo su-refused)`,
    `(start-stop-daemon -S -c ${other === '0:0' ? 'root' : 'nobody'} -x /bin/true >/dev/null 2>&1 && echo SETUID || echo setuid-refused)`,
    'for p in /x /etc/x /bin/x /input/x; do (touch $p 2>/dev/null && echo WROTE $p) || echo refused $p; done',
  ].join('; ');
}

function capabilities(stdout: string[], set: 'CapEff' | 'CapBnd'): bigint {
  const line = stdout.find((l) => l.startsWith(`${set}:`));
  if (!line) throw new Error(`no ${set} line in ${stdout.join(' | ')}`);
  return BigInt(`0x${line.split(/\s+/)[1]}`);
}

function heldOf(mask: bigint): string[] {
  return Object.entries(DROPPED).filter(([, bit]) => (mask >> BigInt(bit)) & 1n).map(([name]) => name);
}

const REFUSED = ['chown-refused', 'su-refused', 'setuid-refused', 'refused /x', 'refused /etc/x', 'refused /bin/x', 'refused /input/x'];

/** Runs `spec` to its end: its exit, its stdout lines and its system lines (exit code 0 checked). */
async function run(t: Test, runtime: DockerRuntime, spec: AssignmentSpec) {
  const { sink, of } = collectLines();
  const job = await runtime.start(spec, sink);
  const exit = await job.done;
  const out = of('stdout');
  t.equal(exit.exitCode, 0, out.join(' | '));
  return { job, exit, out, system: of('system') };
}

/** The bytes of `name` in an uploaded output tar. */
async function fileInTar(body: Buffer, name: string): Promise<Buffer | null> {
  const extract = tar.extract();
  let found: Buffer | null = null;
  extract.on('entry', (header, stream, next) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: unknown) => chunks.push(c as Buffer));
    stream.on('end', () => {
      if (header.name === name) found = Buffer.concat(chunks);
      next();
    });
  });
  await new Promise<void>((resolve, reject) => {
    extract.on('finish', resolve).on('error', reject);
    Readable.from([body]).pipe(extract);
  });
  return found;
}

t.test('default: an image without USER runs as 65534:65534, without the dropped capabilities, and its /output is uploaded', async (t) => {
  const spec = busyboxSpec({ command: ['sh', '-c', probe('0:0')] });
  const { job, exit, out, system } = await run(t, testRuntime(t), spec);
  t.match(out[0], /^uid=65534\(nobody\) gid=65534\(nogroup\)/);
  t.equal(capabilities(out, 'CapEff'), 0n, 'no effective capabilities');
  t.same(heldOf(capabilities(out, 'CapBnd')), [], 'none of the five in the bounding set either');
  t.ok(out.includes('output 65534:65534 755'), '/output belongs to the job user');
  t.ok(out.includes('output-written'));
  for (const line of REFUSED) t.ok(out.includes(line), line);
  t.ok(system.some((l) => l.includes('runs as 65534:65534 (the image names no USER), the owner of /output')), 'the user is logged');

  const upload = await uploadSink(t);
  const results = await collectResults({ spec, exit, outputDir: job.outputDir, logFile: job.logFile, urlFor: (n) => `${upload.url}/${n}`, machineKey });
  t.ok(results.outputs[0]!.sha256, 'the output was packed');
  const body = upload.received.find((u) => u.path === '/output-0')!.body;
  t.equal((await fileInTar(body, 'result.txt'))?.toString(), 'result-bytes\n', 'the uploaded artifact has the bytes the job wrote');
});

t.test('behavior: without a loop mount (a plain folder) /output belongs to the job user too', async (t) => {
  const { out, system } = await run(t, testRuntime(t, { allowLoopMounts: false }), busyboxSpec({ command: ['sh', '-c', probe('0:0')] }));
  t.ok(system.some((l) => l.includes('by a watchdog')), 'the plain folder was used');
  t.match(out[0], /^uid=65534\(nobody\)/);
  t.ok(out.includes('output 65534:65534 755'));
  t.ok(out.includes('output-written'));
  t.ok(out.includes('chown-refused'));
});

t.test("behavior: the image's USER is used: a name from its /etc/passwd, with its groups, owns /output", async (t) => {
  // /etc/passwd is a link, as in images that keep their accounts elsewhere: Docker follows it inside the image.
  const image = await busyboxWithUser(t, {
    user: 'worker',
    files: {
      '/usr/share/accounts/passwd': 'root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\nworker:x:1000:1000:worker:/home:/bin/sh\n',
      '/etc/passwd': { linkTo: '../usr/share/accounts/passwd' },
      '/etc/group': 'root:x:0:\nnogroup:x:65534:\nworker:x:1000:\nstaff:x:50:worker\n',
    },
  });
  const { out, system } = await run(t, testRuntime(t), busyboxSpec({ image: image.repository, imageDigest: image.digest, command: ['sh', '-c', probe('0:0')] }));
  t.match(out[0], /^uid=1000\(worker\) gid=1000\(worker\) groups=.*50\(staff\)/, 'the supplementary groups of the image user too');
  t.ok(out.includes('output 1000:1000 755'));
  t.ok(out.includes('output-written'));
  for (const line of REFUSED) t.ok(out.includes(line), line);
  t.ok(system.some((l) => l.includes("runs as 1000:1000 (the image's USER worker), the owner of /output")));
});

t.test('behavior: files are read from a created container: links followed, null for what is no file', async (t) => {
  const image = await busyboxWithUser(t, { user: 'root', files: { '/etc/accounts': 'a\n', '/etc/loop-a': { linkTo: 'loop-b' }, '/etc/loop-b': { linkTo: '/etc/loop-a' }, '/etc/via': { linkTo: '/etc/accounts' } } });
  const container = await docker.createContainer({ Image: image.reference, Labels: { 'org.gpufarm.test': 'container-files' } });
  t.teardown(() => container.remove({ force: true }));
  t.equal((await readContainerFile(container, '/etc/via'))?.toString(), 'a\n', 'an absolute link');
  t.equal(await readContainerFile(container, '/etc/none'), null, 'a missing file');
  t.equal(await readContainerFile(container, '/etc'), null, 'a folder');
  const loop = readContainerFile(container, '/etc/loop-a');
  await t.rejects(loop, { code: 'create_failed', message: 'reading /etc/loop-a from the image failed (Docker answered 500)' }, 'a loop');
  await loop.catch((err: Error) => t.notMatch(err.message, /var\/lib\/docker/, "the host's storage path stays out of the message"));
});

t.test('behavior: an image whose USER is root runs as root, still without the dropped capabilities', async (t) => {
  const image = await busyboxWithUser(t, { user: 'root' });
  const { out } = await run(t, testRuntime(t), busyboxSpec({ image: image.repository, imageDigest: image.digest, command: ['sh', '-c', probe('65534:65534')] }));
  t.match(out[0], /^uid=0\(root\) gid=0\(root\)/);
  t.same(heldOf(capabilities(out, 'CapEff')), [], 'root holds none of the five');
  t.same(heldOf(capabilities(out, 'CapBnd')), [], 'and cannot regain them');
  t.ok(out.includes('output 0:0 755'));
  t.ok(out.includes('output-written'), 'root writes its own /output without DAC_OVERRIDE');
  for (const line of REFUSED) t.ok(out.includes(line), line);
});

t.test('error: create_failed for a USER the image does not have, before the container starts', async (t) => {
  const image = await busyboxWithUser(t, { user: 'ghost' });
  const runtime = testRuntime(t);
  const { sink } = collectLines();
  await t.rejects(runtime.start(busyboxSpec({ image: image.repository, imageDigest: image.digest }), sink), {
    code: 'create_failed',
    message: /the image's USER ghost is not in its \/etc\/passwd/,
  });
  t.same(await runtime.listContainers(), [], 'nothing is left behind');
});

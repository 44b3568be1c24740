import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { networkInterfaces } from 'node:os';
import t from 'tap';
import { busyboxSpec, collectLines, docker, localImages, testRuntime, uniqueName, uploadSink } from './helpers/docker.js';
import { collectResults } from '../src/artifacts/results.js';
import { generateKeyPairSync } from 'node:crypto';

const MiB = 1024 * 1024;

t.test('behavior: the memory limit gives an OOM report', async (t) => {
  const runtime = testRuntime(t);
  const { sink, of } = collectLines();
  // tail keeps the current line in memory; /dev/zero never ends one.
  const job = await runtime.start(busyboxSpec({ ramBytes: 32 * MiB, command: ['tail', '/dev/zero'] }), sink);
  const exit = await job.done;
  t.equal(exit.oomKilled, true);
  t.equal(exit.exitCode, 137);
  t.equal(exit.timedOut, false);
  t.match(of('system').at(-1), /out of memory/);
});

t.test('behavior: the pids limit holds', async (t) => {
  const runtime = testRuntime(t, { machine: { simulated: true, cpuCores: 2, ramBytes: 4 * 1024 ** 3, pidsLimit: 16 } });
  const { sink, of } = collectLines();
  // `read` is a shell builtin: it needs no fork once the limit is reached.
  const script = 'i=0; while [ $i -lt 10 ]; do sleep 30 & i=$((i+1)); done; read n < /sys/fs/cgroup/pids/pids.current; echo ten-ok $n; ' +
    'while [ $i -lt 50 ]; do sleep 30 & i=$((i+1)); done; echo fifty-ok';
  const job = await runtime.start(busyboxSpec({ command: ['sh', '-c', script] }), sink);
  const exit = await job.done;
  t.match(of('stdout')[0], /^ten-ok \d+$/, 'ten processes fit');
  t.notOk(of('stdout').includes('fifty-ok'), 'fifty do not');
  t.ok(of('stderr').some((l) => /can't fork/.test(l)), 'fork failed inside the container');
  t.not(exit.exitCode, 0);
  t.equal(exit.oomKilled, false);
});

t.test('behavior: maxRuntimeSeconds stops the container (SIGTERM, then SIGKILL after the grace)', async (t) => {
  const runtime = testRuntime(t, { stopGraceSeconds: 1 });
  const { sink, of } = collectLines();
  // The shell ignores SIGTERM (it says so), so the SIGKILL after the grace ends it.
  const script = 'trap "echo got TERM" TERM; echo started; while true; do sleep 0.2; done';
  const started = Date.now();
  const job = await runtime.start(busyboxSpec({ maxRuntimeSeconds: 1, command: ['sh', '-c', script] }), sink);
  const exit = await job.done;
  const seconds = (Date.now() - started) / 1000;
  t.equal(exit.timedOut, true);
  t.equal(exit.oomKilled, false, 'a kill we caused is not OOM');
  t.equal(exit.exitCode, 137);
  t.ok(of('stdout').includes('got TERM'), 'SIGTERM came first');
  t.ok(seconds < 15, `stopped in ${seconds.toFixed(1)} s`);
  t.ok(of('system').some((l) => l.startsWith('maxRuntimeSeconds (1) reached')));
});

t.test('behavior: cancel stops a job with SIGTERM', async (t) => {
  const runtime = testRuntime(t);
  const { sink } = collectLines();
  const job = await runtime.start(busyboxSpec({ command: ['sleep', '60'] }), sink);
  await job.cancel();
  const exit = await job.done;
  t.equal(exit.canceled, true);
  t.equal(exit.timedOut, false);
  t.equal(exit.exitCode, 143);
});

t.test('behavior: network none cannot reach the host listening ports', async (t) => {
  let connections = 0;
  const server = createServer((_req, res) => res.end('hello')).on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const port = (server.address() as { port: number }).port;
  const bridge = (await docker.getNetwork('bridge').inspect()) as { IPAM: { Config: Array<{ Gateway?: string }> } };
  const gateway = bridge.IPAM.Config[0]?.Gateway ?? '172.17.0.1';
  const hostAddrs = Object.values(networkInterfaces()).flat().filter((a) => a && a.family === 'IPv4' && !a.internal).map((a) => a!.address);
  const targets = [...new Set([gateway, ...hostAddrs])];
  const probe = targets.map((a) => `if echo x | nc -w 2 ${a} ${port} >/dev/null 2>&1; then echo REACHED ${a}; else echo blocked ${a}; fi`).join('; ');

  // The control: the same probe from the default bridge reaches the server, so the addresses are right.
  const control = await docker.createContainer({
    name: uniqueName('gf-netcontrol'),
    Image: localImages().busybox.reference,
    Cmd: ['sh', '-c', probe],
    Labels: { 'org.gpufarm.test': 'network-control' },
    HostConfig: { NetworkMode: 'bridge' },
  });
  t.teardown(() => control.remove({ force: true }).catch(() => undefined));
  await control.start();
  await control.wait();
  const controlLog = ((await control.logs({ stdout: true, stderr: true })) as unknown as Buffer).toString('latin1');
  t.match(controlLog, /REACHED/, 'a bridged container reaches the host');
  const before = connections;

  const runtime = testRuntime(t);
  const { sink, of } = collectLines();
  const job = await runtime.start(busyboxSpec({ command: ['sh', '-c', `${probe}; ls /sys/class/net`] }), sink);
  await job.done;
  const out = of('stdout');
  t.notOk(out.some((l) => l.startsWith('REACHED')), `no address reached: ${out.join(' | ')}`);
  t.equal(out.filter((l) => l.startsWith('blocked')).length, targets.length);
  t.same(out.at(-1), 'lo', 'only the loopback interface exists');
  t.equal(connections, before, 'the server saw no connection from the job');
});

t.test('behavior: inputs are downloaded, checked and read-only; the root filesystem is read-only', async (t) => {
  const body = Buffer.from('input bytes\n');
  const sha256 = createHash('sha256').update(body).digest('hex');
  const server = createServer((_req, res) => res.end(body));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/a`;
  const runtime = testRuntime(t);
  const { sink, of } = collectLines();
  const script = 'cat /input/data.txt; (echo more >> /input/data.txt) 2>/dev/null && echo INPUT-WRITABLE || echo input-read-only; ' +
    '(touch /etc/x) 2>/dev/null && echo ROOT-WRITABLE || echo root-read-only; (echo y > /tmp/y) && echo tmp-writable; (echo z > /output/z) && echo output-writable';
  const job = await runtime.start(busyboxSpec({ command: ['sh', '-c', script], inputs: [{ mountName: 'data.txt', artifactId: 'art_1', url, sha256, sizeBytes: body.length }] }), sink);
  const exit = await job.done;
  t.equal(exit.exitCode, 0);
  t.same(of('stdout'), ['input bytes', 'input-read-only', 'root-read-only', 'tmp-writable', 'output-writable']);
  t.ok(of('system').some((l) => l.startsWith(`input data.txt: ${body.length} bytes, sha256 ${sha256} verified`)));

  await t.rejects(
    runtime.start(busyboxSpec({ inputs: [{ mountName: 'data.txt', artifactId: 'art_1', url, sha256: '0'.repeat(64), sizeBytes: body.length }] }), sink),
    { code: 'input_failed' },
    'a hash that differs is refused',
  );
  await t.rejects(
    runtime.start(busyboxSpec({ inputs: [{ mountName: 'data.txt', artifactId: 'art_1', url, sha256, sizeBytes: 4 }] }), sink),
    { code: 'input_failed' },
    'more bytes than announced are refused',
  );
});

const machineKey = generateKeyPairSync('ed25519').privateKey;

t.test('behavior: writing past an output rule maxBytes fails (loop mount) and nothing over the limit is uploaded', async (t) => {
  const runtime = testRuntime(t);
  const { sink, of } = collectLines();
  const spec = busyboxSpec({
    outputRules: [{ path: '/output', maxBytes: 1 * MiB }],
    command: ['sh', '-c', 'dd if=/dev/zero of=/output/big bs=65536 count=64 2>&1; echo dd-exit $?'],
  });
  const job = await runtime.start(spec, sink);
  const exit = await job.done;
  t.equal(exit.exitCode, 0);
  t.ok(of('system').some((l) => l.includes('loop-mounted ext4')), 'the loop mount was chosen and logged');
  t.ok(of('stdout').some((l) => /No space left on device/.test(l)), 'the write failed with ENOSPC');
  t.notOk(of('stdout').includes('dd-exit 0'));

  const upload = await uploadSink(t);
  const results = await collectResults({ spec, exit, outputDir: job.outputDir, logFile: job.logFile, urlFor: (n) => `${upload.url}/${n}`, machineKey });
  t.equal(results.outputs[0]!.exceeded, true);
  t.equal(results.outputs[0]!.sha256, null);
  for (const r of upload.received.filter((u) => u.path.startsWith('/output'))) t.ok(r.body.length <= MiB, 'no upload passes the limit');
});

t.test('behavior: the watchdog stops a job that writes past the limit where no loop mount is used', async (t) => {
  const runtime = testRuntime(t, { allowLoopMounts: false });
  const { sink, of } = collectLines();
  const spec = busyboxSpec({
    outputRules: [{ path: '/output', maxBytes: 1 * MiB }],
    command: ['sh', '-c', 'dd if=/dev/zero of=/output/big bs=65536 count=64 2>/dev/null; echo written; sleep 30'],
  });
  const job = await runtime.start(spec, sink);
  const exit = await job.done;
  t.equal(exit.outputLimitExceeded, true);
  t.equal(exit.oomKilled, false);
  t.ok(of('system').some((l) => l.includes('by a watchdog (loop mounts disabled by configuration)')), 'the watchdog was chosen and logged');

  const upload = await uploadSink(t);
  const results = await collectResults({ spec, exit, outputDir: job.outputDir, logFile: job.logFile, urlFor: (n) => `${upload.url}/${n}`, machineKey });
  t.equal(results.outputs[0]!.exceeded, true);
  t.notOk(upload.received.some((u) => u.path.startsWith('/output') && u.body.length > MiB));
});

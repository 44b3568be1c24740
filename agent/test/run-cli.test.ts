import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { jsonLogLines, LOG_LEVELS, parseJsonLogLine } from '@gpufarm/shared';
import { readMachineFile } from '../src/config/state.js';
import { gfAgent } from './helpers/cli.js';
import { TestPeer } from './helpers/peer.js';
import { testCommand } from '@gpufarm/shared/build/test-bundles';

const [NODE, ...GF_AGENT] = testCommand('agent');
const TOKEN = `gfe_${'r'.repeat(43)}`;

t.test('behavior: gf-agent run connects, reports, refuses an assignment naming a GPU it does not offer, and stops on SIGTERM', async (t) => {
  const peer = await TestPeer.start({ enrollmentTokens: [TOKEN], heartbeatIntervalSeconds: 1 });
  t.teardown(() => peer.close());
  const stateDir = join(mkdtempSync(join(tmpdir(), 'gf-agent-run-')), 'state');
  t.teardown(() => rmSync(join(stateDir, '..'), { recursive: true, force: true }));
  const env = { GF_AGENT_STATE_DIR: stateDir, GF_AGENT_SIMULATE_GPUS: '2x l4-24gb' };

  const notEnrolled = await gfAgent(['run'], env);
  t.equal(notEnrolled.code, 1);
  // Even its failure to start is a JSON line (journald keeps one entry a line).
  t.match(jsonLogLines(notEnrolled.stdout), [{ level: LOG_LEVELS.fatal, msg: /not enrolled [\s\S]*gf-agent enroll --server URL --token/ }]);
  t.equal(notEnrolled.stderr, '');

  t.equal((await gfAgent(['enroll', '--server', peer.url, '--token', TOKEN], env)).code, 0);
  const base = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('GF_AGENT_')));
  const child = spawn(NODE, [...GF_AGENT, 'run'], { env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });

  await peer.waitFor(() => peer.messages('heartbeat').length >= 1, 'hello and a heartbeat');
  const hello = peer.messages('hello')[0]!;
  t.equal(hello.inventory.gpus.length, 2);
  t.same(hello.running, []);
  t.equal(hello.draining, false);
  const beat = peer.messages('heartbeat')[0]!;
  t.equal(beat.health.status, 'healthy');
  t.same(beat.gpus.map((g) => g.uuid), ['GPU-sim-l4-24gb-0', 'GPU-sim-l4-24gb-1']);

  peer.send({
    type: 'assign',
    assignment: { assignmentId: 'asg_run', jobId: 'job_run', image: 'busybox', imageDigest: null, command: ['true'], env: {}, gpus: [{ index: 2, uuid: 'GPU-sim-l4-24gb-2' }], cpuCores: null, ramBytes: null, maxRuntimeSeconds: 10, networkPolicy: { mode: 'none' }, inputs: [], outputRules: [{ path: '/output', maxBytes: 1024 }] },
  });
  await peer.waitFor(() => peer.messages('assignment.rejected').length === 1, 'rejection');
  t.match(peer.messages('assignment.rejected')[0], { assignmentId: 'asg_run', reason: 'gpus_unavailable', message: /GPU 2 \(GPU-sim-l4-24gb-2\)/ });

  const status = await gfAgent(['status'], env);
  t.equal(status.code, 0, status.stderr);
  t.match(status.stdout, /enrolled: machine m_/);
  t.match(status.stdout, /daemon: running \(pid \d+\), link ready/);
  t.match(status.stdout, /health: healthy/);

  child.kill('SIGTERM');
  t.equal(await exited, 0, 'exits cleanly on SIGTERM');
  // Its log is JSON lines on stdout, each with the machine's id; nothing else is printed.
  const machineId = readMachineFile(stateDir)!.machineId;
  const lines = stdout.trimEnd().split('\n');
  t.same(lines.filter((l) => parseJsonLogLine(l) === null), [], 'every line is a JSON log line');
  t.equal(stderr, '');
  const parsed = jsonLogLines(stdout);
  t.ok(parsed.every((l) => l.machineId === machineId), 'every line carries machineId');
  t.match(parsed.find((l) => l.msg.startsWith('link up: ')), { level: LOG_LEVELS.info, msg: new RegExp(`^link up: machine ${machineId}`) });
  t.match(parsed.find((l) => l.msg.startsWith('assignment asg_run rejected')), { jobId: 'job_run', assignmentId: 'asg_run', reason: 'gpus_unavailable' }, "a job's line carries its ids");
  t.match(parsed.at(-1), { level: LOG_LEVELS.info, msg: /^SIGTERM: stopping/ });
});

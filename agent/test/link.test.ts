import { existsSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { TestPeer } from './helpers/peer.js';
import { testDaemon } from './helpers/daemon.js';

/** Writes `count` lines in slices, yielding to the event loop between slices, calling `during` after each. */
async function produce(write: (i: number) => void, count: number, during: (written: number) => void = () => undefined): Promise<void> {
  for (let i = 0; i < count; ) {
    const end = Math.min(count, i + 500);
    for (; i < end; i++) write(i);
    during(i);
    await new Promise((r) => setImmediate(r));
  }
}

t.test('behavior: the peer drops the link mid-stream three times; every line arrives exactly once, in order', async (t) => {
  const peer = await TestPeer.start();
  t.teardown(() => peer.close());
  const { machineToken } = peer.addMachine('m_link');
  const agent = testDaemon({ server: peer.url, machineToken, simulate: '1x rtx-4090-24gb' });
  t.teardown(agent.cleanup);
  await agent.daemon.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');

  const total = 60_000;
  const sink = agent.daemon.logs.open('asg_chatty');
  // The peer drops the socket after storing these many lines, before acking them.
  const drops = [10_000, 25_000, 40_000];
  peer.onStored = (_id, stored) => {
    if (drops.length > 0 && stored >= drops[0]!) {
      drops.shift();
      peer.dropAll();
    }
  };
  await produce((i) => sink.write(i % 7 === 0 ? 'stderr' : 'stdout', `line ${i} ${'x'.repeat(i % 50)}`), total);
  await peer.waitFor(() => (peer.lines.get('asg_chatty')?.length ?? 0) === total, 'all lines', 60_000);
  await sink.drained();

  const stored = peer.lines.get('asg_chatty')!;
  let inOrder = true;
  for (let i = 0; i < total; i++) {
    const line = stored[i]!;
    if (line.seq !== i || line.line !== `line ${i} ${'x'.repeat(i % 50)}` || line.stream !== (i % 7 === 0 ? 'stderr' : 'stdout')) {
      inOrder = false;
      t.fail(`line ${i} is ${JSON.stringify(line)}`);
      break;
    }
  }
  t.ok(inOrder, 'lines stored in seq order with their text and stream');
  t.equal(peer.gaps, 0, 'no line arrived before the one it follows');
  t.equal(peer.invalid.length, 0, 'every message passed the schemas');
  t.equal(drops.length, 0, 'the link was dropped three times mid-stream');
  t.ok(peer.connections >= 4, `reconnected after each drop (${peer.connections} connections)`);
  t.comment(`resent after reconnects and ignored by the peer: ${peer.resent} lines`);
  t.equal(agent.daemon.logs.stats('asg_chatty')?.unacked, 0, 'nothing left unacked');
});

t.test('behavior: a server that does not say what it stored gets the unacked lines again and stores each once', async (t) => {
  const peer = await TestPeer.start();
  t.teardown(() => peer.close());
  peer.reportAcked = false;
  const { machineToken } = peer.addMachine('m_resend');
  const agent = testDaemon({ server: peer.url, machineToken, simulate: '1x l4-24gb' });
  t.teardown(agent.cleanup);
  await agent.daemon.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');
  const sink = agent.daemon.logs.open('asg_resend');
  const total = 5_000;
  let dropped = false;
  peer.ackLogs = false;
  peer.onStored = (_id, stored) => {
    if (!dropped && stored >= 2_000) {
      dropped = true;
      peer.ackLogs = true;
      peer.dropAll();
    }
  };
  await produce((i) => sink.write('stdout', `r ${i}`), total);
  await peer.waitFor(() => (peer.lines.get('asg_resend')?.length ?? 0) === total, 'all lines');
  await sink.drained();
  t.ok(peer.resent >= 2_000, `lines stored before the drop were sent again (${peer.resent}) and ignored`);
  t.ok(peer.lines.get('asg_resend')!.every((l, i) => l.seq === i && l.line === `r ${i}`), 'each line stored once, in order');
  t.equal(peer.gaps, 0);
});

t.test('behavior: past the memory bound lines spill to disk and still all arrive, in order', async (t) => {
  const peer = await TestPeer.start({ ackLogs: false });
  t.teardown(() => peer.close());
  const { machineToken } = peer.addMachine('m_spill');
  const memoryBytes = 64 * 1024;
  const agent = testDaemon({ server: peer.url, machineToken, simulate: '1x l4-24gb', daemon: { logMemoryBytes: memoryBytes } });
  t.teardown(agent.cleanup);
  await agent.daemon.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');

  const total = 20_000;
  const sink = agent.daemon.logs.open('asg_spill');
  await produce((i) => sink.write('stdout', `spill line ${i}`), total);
  agent.daemon.logs.flush();
  const stats = agent.daemon.logs.stats('asg_spill')!;
  t.ok(stats.spilled > 0, `${stats.spilled} lines wait on disk`);
  t.ok(stats.memoryCost <= memoryBytes + 1024, `memory holds ${stats.memoryCost} bytes of lines, within the ${memoryBytes} bound`);
  t.equal(stats.unacked, total, 'nothing is acked yet');
  t.ok(existsSync(join(agent.stateDir, 'spool', 'asg_spill.jsonl')), 'the spill file exists');

  // Acks resume; a reconnect makes the agent learn the server's last stored seq from welcome.
  peer.ackLogs = true;
  peer.dropAll();
  await peer.waitFor(() => (peer.lines.get('asg_spill')?.length ?? 0) === total, 'all lines', 60_000);
  await sink.drained();
  const stored = peer.lines.get('asg_spill')!;
  t.ok(stored.every((l, i) => l.seq === i && l.line === `spill line ${i}`), 'every line once, in order');
  t.equal(peer.gaps, 0);
  t.ok(agent.daemon.logs.stats('asg_spill')!.spilledTotal > 0, 'lines went through the spill file');
  t.notOk(existsSync(join(agent.stateDir, 'spool', 'asg_spill.jsonl')), 'the spill file is removed once everything is acked');
});

t.test('behavior: an assignment is rejected with a clear reason until the runtime is wired', async (t) => {
  const peer = await TestPeer.start();
  t.teardown(() => peer.close());
  const { machineToken } = peer.addMachine('m_assign');
  const agent = testDaemon({ server: peer.url, machineToken, simulate: '2x h100-80gb-sxm' });
  t.teardown(agent.cleanup);
  await agent.daemon.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');
  const hello = peer.messages('hello')[0]!;
  t.equal(hello.inventory.gpus.length, 2);
  t.ok(hello.inventory.gpus.every((g) => g.simulated && g.classId === 'h100-80gb-sxm'));
  t.equal(hello.inventory.health.gpuProbe, 'simulated');

  peer.send({
    type: 'assign',
    assignment: {
      assignmentId: 'asg_1', jobId: 'job_1', image: '127.0.0.1:5000/gpufarm/canary:1', imageDigest: null, command: [], env: {},
      gpus: [{ index: 0, uuid: 'GPU-sim-h100-80gb-sxm-0' }], cpuCores: null, ramBytes: null, maxRuntimeSeconds: 60,
      networkPolicy: { mode: 'none' }, inputs: [], outputRules: [{ path: '/output', maxBytes: 1024 }],
    },
  });
  await peer.waitFor(() => peer.messages('assignment.rejected').length === 1, 'rejection');
  const rejected = peer.messages('assignment.rejected')[0]!;
  t.equal(rejected.assignmentId, 'asg_1');
  t.equal(rejected.reason, 'unsupported');
  t.match(rejected.message, /no container runtime/);

  peer.send({ type: 'drain', undrain: false, reason: 'maintenance' });
  peer.send({ type: 'assign', assignment: { ...(await Promise.resolve({ assignmentId: 'asg_2', jobId: 'job_2', image: 'x', imageDigest: null, command: [], env: {}, gpus: [], cpuCores: null, ramBytes: null, maxRuntimeSeconds: 60, networkPolicy: { mode: 'none' as const }, inputs: [], outputRules: [{ path: '/output', maxBytes: 1 }] })) } });
  await peer.waitFor(() => peer.messages('assignment.rejected').length === 2, 'second rejection');
  t.equal(peer.messages('assignment.rejected')[1]!.reason, 'draining');
});

t.test('error: a refused machine token stops the link without retrying', async (t) => {
  const peer = await TestPeer.start();
  t.teardown(() => peer.close());
  const agent = testDaemon({ server: peer.url, machineToken: `gfa_${'A'.repeat(43)}`, simulate: '1x l4-24gb' });
  t.teardown(agent.cleanup);
  await agent.daemon.start();
  for (let i = 0; i < 100 && agent.daemon.link.state !== 'refused'; i++) await new Promise((r) => setTimeout(r, 20));
  t.equal(agent.daemon.link.state, 'refused');
  t.match(agent.logs.join('\n'), /refused the machine token \(HTTP 401\)/);
  t.equal(peer.connections, 0);
});

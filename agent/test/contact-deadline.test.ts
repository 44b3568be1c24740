import t from 'tap';
import { AGENT_PROTOCOL_VERSION, AGENT_PROTOCOL_VERSIONS } from '@gpufarm/shared';
import { toWireInventory } from '../src/inventory/snapshot.js';
import { AgentLink } from '../src/link/agent-link.js';
import type { AssignmentRunner } from '../src/link/assignment-runner.js';
import { ContactDeadline, DEFAULT_LOST_AFTER_SECONDS, partitionGraceSeconds } from '../src/link/contact-deadline.js';
import { testDaemon } from './helpers/daemon.js';
import { TestPeer } from './helpers/peer.js';

/** Resolves once `check()` holds, looking every 10 ms. */
function eventually(check: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    const timer = setInterval(() => {
      if (!check()) return;
      clearInterval(timer);
      resolve();
    }, 10);
  });
}

t.test('partitionGraceSeconds', async (t) => {
  const cases: Array<[string, Parameters<typeof partitionGraceSeconds>[0], number]> = [
    ['default: the control plane defaults (350 s) and 10 s stops: 350 - 10 - 18 (5 %)', { lostAfterSeconds: DEFAULT_LOST_AFTER_SECONDS, heartbeatIntervalSeconds: 10, stopSeconds: 10, capSeconds: null }, 322],
    ['args: a short requeue time keeps the 5 s margin: 23 - 10 - 5', { lostAfterSeconds: 23, heartbeatIntervalSeconds: 1, stopSeconds: 10, capSeconds: null }, 8],
    ['args: an hour: the margin is 5 % (180 s)', { lostAfterSeconds: 3600, heartbeatIntervalSeconds: 10, stopSeconds: 10, capSeconds: null }, 3410],
    ['args: the operator cap only shortens it', { lostAfterSeconds: 350, heartbeatIntervalSeconds: 10, stopSeconds: 10, capSeconds: 60 }, 60],
    ['args: a cap above the derived grace changes nothing', { lostAfterSeconds: 350, heartbeatIntervalSeconds: 10, stopSeconds: 10, capSeconds: 900 }, 322],
    ['behavior: never under three heartbeat intervals, so a healthy link does not stop jobs', { lostAfterSeconds: 11, heartbeatIntervalSeconds: 1, stopSeconds: 10, capSeconds: null }, 3],
    ['behavior: a cap of 0 is floored at three heartbeat intervals too', { lostAfterSeconds: 350, heartbeatIntervalSeconds: 2, stopSeconds: 10, capSeconds: 0 }, 6],
  ];
  for (const [name, params, expected] of cases) t.equal(partitionGraceSeconds(params), expected, name);
  t.equal(DEFAULT_LOST_AFTER_SECONDS, 350, 'the control plane default: offline after 50 s, requeued 300 s later');
});

t.test('ContactDeadline', async (t) => {
  t.test('behavior: expires once after the grace without news, and says when news comes', async (t) => {
    const events: string[] = [];
    let now = 1_000;
    let expired!: () => void;
    const gotExpired = new Promise<void>((resolve) => (expired = resolve));
    const deadline = new ContactDeadline({
      graceSeconds: 0.05,
      now: () => now,
      onExpired: (seconds) => {
        events.push(`expired ${seconds}`);
        expired();
      },
      onContact: () => events.push('contact'),
    });
    t.teardown(() => deadline.stop());
    now += 10_000;
    await gotExpired;
    t.same(events, ['expired 0.05']);
    deadline.heard(500);
    t.same(events, ['expired 0.05'], 'a proof older than the last one is no news');
    deadline.heard(now);
    t.same(events, ['expired 0.05', 'contact']);
  });

  t.test('behavior: news moves the deadline: no expiry while it keeps coming', async (t) => {
    let now = 0;
    const events: string[] = [];
    const deadline = new ContactDeadline({ graceSeconds: 10, now: () => now, onExpired: () => events.push('expired'), onContact: () => events.push('contact') });
    t.teardown(() => deadline.stop());
    for (let i = 0; i < 5; i++) {
      now += 9_000;
      deadline.heard(now);
      await new Promise((r) => setTimeout(r, 5));
    }
    t.same(events, []);
  });
});

/** A runner that records what the daemon tells it. */
function recordingRunner(calls: string[]): AssignmentRunner {
  return {
    accept: async () => ({ accepted: false, reason: 'unsupported', message: 'no runtime' }),
    cancel: async () => undefined,
    running: async () => [],
    restore: async () => undefined,
    setPartitioned: (p) => calls.push(`partitioned ${p}`),
    contactLost: (lost) => calls.push(lost ? `contactLost ${lost.seconds}` : 'contact'),
    close: async () => undefined,
  };
}

t.test('behavior: the daemon takes its grace from welcome.lostAfterSeconds and stops jobs once no heartbeat was confirmed for it', async (t) => {
  const peer = await TestPeer.start({ heartbeatIntervalSeconds: 1, lostAfterSeconds: 11 });
  t.teardown(() => peer.close());
  const { machineToken } = peer.addMachine('m_grace');
  const calls: string[] = [];
  const agent = testDaemon({ server: peer.url, machineToken, simulate: '1x l4-24gb', runner: recordingRunner(calls), daemon: { heartbeatIntervalSeconds: 1, partition: { capSeconds: null, stopSeconds: 1 } } });
  t.teardown(agent.cleanup);
  await agent.daemon.start();
  await peer.waitFor(() => peer.messages('heartbeat').length >= 3, 'heartbeats');
  t.match(agent.logs.join('\n'), /running jobs stop after 5 s without the control plane, which may requeue them after 11 s/, '11 - 1 stop - 5 margin');
  t.notOk(calls.some((c) => c.startsWith('contactLost')), 'nothing stopped while heartbeats are confirmed');

  peer.setOffline(true);
  await eventually(() => calls.some((c) => c.startsWith('contactLost')));
  t.ok(calls.includes('contactLost 5'), `the runner is told after the grace: ${calls.join(', ')}`);
  t.match(agent.logs.join('\n'), /no heartbeat confirmed by the control plane for 5 s \(the partition grace\): stopping running jobs/);

  peer.setOffline(false);
  await peer.waitFor(() => calls.includes('contact'), 'contact again after the next welcome');
  t.equal(calls.filter((c) => c.startsWith('contactLost')).length, 1, 'told once per partition');
});

t.test('behavior: a server that does not send lostAfterSeconds (protocol 1) gets the default requeue time', async (t) => {
  const peer = await TestPeer.start({ heartbeatIntervalSeconds: 1 });
  t.teardown(() => peer.close());
  const { machineToken } = peer.addMachine('m_grace_default');
  const agent = testDaemon({ server: peer.url, machineToken, simulate: '1x l4-24gb', daemon: { heartbeatIntervalSeconds: 1, partition: { capSeconds: null, stopSeconds: 10 } } });
  t.teardown(agent.cleanup);
  await agent.daemon.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');
  await new Promise((r) => setTimeout(r, 100));
  t.match(agent.logs.join('\n'), /running jobs stop after 322 s without the control plane, which may requeue them after 350 s \(its default; it did not say\)/);
});

t.test('behavior: AgentLink reports the pong of each ping() with that ping\'s send time, never a keepalive ping\'s', async (t) => {
  const peer = await TestPeer.start();
  t.teardown(() => peer.close());
  const { machineToken } = peer.addMachine('m_pings');
  const agent = testDaemon({ server: peer.url, machineToken, simulate: '1x l4-24gb' });
  t.teardown(agent.cleanup);
  const delivered: number[] = [];
  const link = new AgentLink({
    server: peer.url,
    machineToken,
    hello: async () => ({
      type: 'hello',
      protocolVersion: AGENT_PROTOCOL_VERSION,
      supportedVersions: [...AGENT_PROTOCOL_VERSIONS],
      agentVersion: '0.0.0-test',
      inventory: toWireInventory(await agent.inventory.refresh()),
      benchmark: null,
      running: [],
      draining: false,
    }),
    onWelcome: () => undefined,
    onMessage: () => undefined,
    onDelivered: (at) => delivered.push(at),
    reconnect: { initialMs: 20, maxMs: 200 },
    // Short, but not so short that a busy machine's stall (three intervals without a pong) makes
    // the link reconnect under the test.
    pingIntervalMs: 250,
  });
  t.teardown(() => link.stop());
  let keepalives = 0;
  link.start();
  await eventually(() => link.ready);
  // Every socket the peer has, a reconnected one included, is counted once.
  const counted = new WeakSet<object>();
  await eventually(() => {
    for (const ws of peer.sockets) {
      if (counted.has(ws)) continue;
      counted.add(ws);
      ws.on('ping', () => keepalives++);
    }
    return keepalives >= 5;
  });
  t.same(delivered, [], `${keepalives} keepalive pings answered, none reported`);
  const before = performance.now();
  link.ping();
  await eventually(() => delivered.length > 0);
  t.equal(delivered.length, 1);
  t.ok(delivered[0]! >= before && delivered[0]! <= performance.now(), 'the send time of the ping answered');
});

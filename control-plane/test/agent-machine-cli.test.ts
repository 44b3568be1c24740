import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { earningLine } from '@gpufarm/shared';
import t from 'tap';
import { createEnrollmentToken } from '../src/farms/enrollment-tokens.js';
import { AgentSocket, gfAgent, heartbeat, hello, startGatewayApp, testInventory } from './helpers/agent-client.js';
import { devWallet, fakeWebDist, PUBLIC_URL, session, signIn } from './helpers/web.js';

/**
 * `gf-agent status | drain | undrain | unenroll` on a machine enrolled with the real CLI against
 * a real control plane: status prints the verdict the operator area shows, drain reaches the
 * agent's link, unenroll revokes the token before the local enrollment is forgotten.
 */
t.test('behavior: the operator commands on the machine, with the verdict the operator area shows', async (t) => {
  const payout = devWallet(1);
  // The test's link sends no heartbeat between its messages while the CLI runs (a process start
  // each): a minute's interval keeps it from being closed as silent on a loaded machine.
  const { app, db, url } = await startGatewayApp(t, { env: { GF_PUBLIC_URL: PUBLIC_URL, GF_WEB_DIR: fakeWebDist(t), GF_HEARTBEAT_SECONDS: '60' } });
  const root = mkdtempSync(join(tmpdir(), 'gf-agent-machine-'));
  t.teardown(() => rmSync(root, { recursive: true, force: true }));
  const stateDir = join(root, 'state');
  const env = { GF_AGENT_STATE_DIR: stateDir, GF_AGENT_SIMULATE_GPUS: '2x rtx-4090-24gb' };
  const { token } = await createEnrollmentToken(db, { farmSlug: 'box-farm', payoutAddress: payout.address, regionKey: 'us-east', pricePerGpuHourMicroUsd: 450_000, ttlSeconds: 3600 });
  const enrolled = await gfAgent(['enroll', '--server', url, '--token', token], env);
  t.equal(enrolled.code, 0, enrolled.stderr);
  const me = await signIn(app, payout);
  const [machineRow] = await db.query<{ id: string }>('SELECT id FROM machines');
  const machineId = machineRow!.id;
  /** The verdict line the operator area's machine page words. */
  const pageLine = async () => earningLine((await app.inject({ url: `/operator/api/machines/${machineId}`, headers: session(me) })).json().machine.earning);

  const offline = await gfAgent(['status'], env);
  t.equal(offline.code, 0, offline.stderr);
  const offlineLines = offline.stdout.split('\n');
  t.equal(offlineLines[1], 'not earning: Offline: the agent never connected. Fix: Start the agent (`systemctl start gf-agent`) and check that the machine reaches the control plane, then run `gf-agent status`.');
  t.equal(offlineLines[1], await pageLine(), 'the line the page shows');
  t.same(offlineLines.slice(3, 5), ['GPU 0: healthy', 'GPU 1: healthy'], 'per-GPU health');

  // The machine's link says hello: online, waiting for its verification.
  const machineToken = (JSON.parse(readFileSync(join(stateDir, 'machine.json'), 'utf8')) as { machineToken: string }).machineToken;
  const socket = await AgentSocket.connect(url, machineToken);
  t.teardown(() => socket.close());
  socket.send(hello(testInventory({ gpus: 2, classId: 'rtx-4090-24gb' })));
  await socket.next('welcome');
  await socket.barrier();
  const online = await gfAgent(['status', '--json'], env);
  const report = JSON.parse(online.stdout) as { controlPlane: { machine: { state: string; earning: { code: string }; drainRequested: boolean } } };
  t.match(report.controlPlane.machine, { state: 'online', earning: { code: 'tier_unverified' }, drainRequested: false });
  t.match((await gfAgent(['status'], env)).stdout, `\n${await pageLine()}\n`);

  // The GPU probe fails (no container sees the GPUs), then the operator fixes it.
  const broken = testInventory({ gpus: 2, healthy: false });
  socket.send(heartbeat({ health: broken.health, inventory: broken, gpus: [] }));
  await socket.barrier();
  const failedLine = (await gfAgent(['status'], env)).stdout.split('\n')[1];
  t.equal(failedLine, 'not earning: GPU probe failed: no container can see the GPUs: install the NVIDIA container toolkit. Fix: Install nvidia-container-toolkit, run `nvidia-ctk runtime configure --runtime=docker` and restart docker, then run `gf-agent doctor` on the machine.');
  t.equal(failedLine, await pageLine(), 'the page says the same');
  const fixed = testInventory({ gpus: 2, classId: 'rtx-4090-24gb' });
  socket.send(heartbeat({ health: fixed.health, inventory: fixed }));
  await socket.barrier();
  t.match(await pageLine(), /^not earning: (Proving its GPUs|GPUs not proven)/, 'fixed: the probe is no longer what keeps it from earning');

  const drained = await gfAgent(['drain', '--reason', 'new fans'], env);
  t.equal(drained.code, 0, drained.stderr);
  t.match(drained.stdout, /^drained machine .*\nnot earning: Drained: it takes no new job\./);
  t.match(await socket.next('drain'), { type: 'drain', undrain: false }, 'the link is told');
  const undrained = await gfAgent(['undrain'], env);
  t.equal(undrained.code, 0, undrained.stderr);
  t.match(await socket.next('drain'), { type: 'drain', undrain: true });
  const audit = await db.query<{ actor_kind: string; actor_id: string; action: string }>('SELECT actor_kind, actor_id, action FROM audit_log ORDER BY id');
  t.same(audit.map((a) => [a.actor_kind, a.actor_id, a.action]), [['machine', machineId, 'machine.drain'], ['machine', machineId, 'machine.undrain']]);

  const unconfirmed = await gfAgent(['unenroll'], env);
  t.equal(unconfirmed.code, 1);
  t.match(unconfirmed.stderr, /pass --yes/);
  t.ok(existsSync(join(stateDir, 'machine.json')), 'nothing removed without confirmation');

  const gone = await gfAgent(['unenroll', '--yes'], env);
  t.equal(gone.code, 0, gone.stderr);
  t.match(gone.stdout, new RegExp(`^unenrolled machine ${machineId} at `));
  t.notOk(existsSync(join(stateDir, 'machine.json')), 'the machine token is removed');
  t.notOk(existsSync(join(stateDir, 'machine-key.pem')), 'the key is removed');
  const [after] = await db.query<{ status: string; unenrolled: boolean; events: number }>(
    `SELECT status, unenrolled_at IS NOT NULL AS unenrolled, (SELECT count(*)::int FROM fleet_events WHERE type = 'machine.unenrolled' AND machine_id = $1) AS events FROM machines WHERE id = $1`,
    [machineId],
  );
  t.same(after, { status: 'disabled', unenrolled: true, events: 1 });
  const refused = await app.inject({ url: '/agent/v1/machine', headers: { authorization: `Bearer ${machineToken}` } });
  t.equal(refused.statusCode, 401, 'the old token opens nothing');
  t.match(await pageLine(), /^not earning: Unenrolled/);
  t.match((await gfAgent(['status'], env)).stdout, /^not enrolled/);
  t.match((await gfAgent(['drain'], env)).stderr, /not enrolled/);
});

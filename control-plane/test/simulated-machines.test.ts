import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AGENT_MACHINE_PATH, capacityListSchema, serviceIndexSchema, type MachineInventory } from '@gpufarm/shared';
import t from 'tap';
import { loadConfig } from '../src/config.js';
import { createQueuedJobs } from '../src/testing/job-factories.js';
import { startControlPlane, type ControlPlane } from '../src/server.js';
import { ADMIN_TOKEN, bearer, buildTestApp, createTestKey } from './helpers/app.js';
import { AgentSocket, enrollBody, hello, newEnrollmentToken, testInventory } from './helpers/agent-client.js';
import { createPostgresTestDatabase } from './helpers/database.js';

/**
 * Simulated machines (an agent that says `simulated: true` proves no GPU) are offered only on
 * deployments that allow them: never where keys are live. Through the real control plane
 * (`startControlPlane`: its offer index, gateway and matcher loop wired from the configuration),
 * over HTTP and the agent's WebSocket.
 */

interface TestContext {
  teardown(fn: () => unknown): void;
}

async function controlPlane(t: TestContext, env: Record<string, string>): Promise<ControlPlane> {
  const { url } = await createPostgresTestDatabase(t);
  const dir = mkdtempSync(join(tmpdir(), 'gf-simulated-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const config = loadConfig({ DATABASE_URL: url!, PORT: '0', GF_DATA_DIR: dir, GF_ADMIN_TOKEN: ADMIN_TOKEN, GF_MATCH_INTERVAL_MS: '50', GF_LOG_LEVEL: 'silent', ...env });
  const cp = await startControlPlane(config, { logger: false });
  t.teardown(() => cp.close());
  return cp;
}

async function serviceIndex(cp: ControlPlane) {
  const res = await fetch(`${cp.url}/v1`);
  return serviceIndexSchema.parse(await res.json());
}

function realInventory(classId: string): MachineInventory {
  const inventory = testInventory({ simulated: false, gpus: 1, classId });
  inventory.health.probeListing = inventory.gpus.map((g) => ({ name: g.name, uuid: g.uuid }));
  return inventory;
}

async function enroll(cp: ControlPlane, inventory: MachineInventory, token?: string): Promise<Response> {
  return fetch(`${cp.url}/agent/v1/enroll`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(enrollBody(token ?? (await newEnrollmentToken(cp.db)), inventory)),
  });
}

/** Enrolls `enrolled`, connects its agent, says hello with `said` and waits until the hello was handled. */
async function connect(t: TestContext, cp: ControlPlane, enrolled: MachineInventory, said: MachineInventory) {
  const res = await enroll(cp, enrolled);
  if (res.status !== 201) throw new Error(`enroll answered ${res.status}: ${await res.text()}`);
  const machine = (await res.json()) as { machineId: string; machineToken: string };
  const agent = await AgentSocket.connect(cp.url, machine.machineToken);
  t.teardown(() => agent.close());
  agent.send(hello(said));
  await agent.next('welcome');
  await agent.barrier();
  return { ...machine, agent };
}

async function capacity(cp: ControlPlane) {
  await cp.offerIndex.refresh();
  return capacityListSchema.parse(await (await fetch(`${cp.url}/v1/capacity`)).json()).data;
}

t.test('default: GET /v1 says whether simulated machines are offered, from GF_ENVIRONMENT or GF_ALLOW_SIMULATED_MACHINES', async (t) => {
  const cases: Array<[Record<string, string>, boolean]> = [
    [{}, true],
    [{ GF_ENVIRONMENT: 'testnet' }, false],
    [{ GF_ENVIRONMENT: 'testnet', GF_ALLOW_SIMULATED_MACHINES: 'true' }, true],
    [{ GF_ENVIRONMENT: 'local', GF_ALLOW_SIMULATED_MACHINES: 'false' }, false],
    [{ GF_ENVIRONMENT: 'mainnet' }, false],
  ];
  const { db } = await createPostgresTestDatabase(t);
  for (const [env, allowed] of cases) {
    const { app } = await buildTestApp(t, { db, env });
    t.same(serviceIndexSchema.parse((await app.inject({ url: '/v1' })).json()).simulatedMachines, { allowed }, JSON.stringify(env));
  }
  t.throws(() => loadConfig({ GF_ENVIRONMENT: 'mainnet', GF_ALLOW_SIMULATED_MACHINES: 'true' }), { code: 'invalid_config', message: /GF_ALLOW_SIMULATED_MACHINES: must not be true when GF_ENVIRONMENT is mainnet/ });
});

t.test('behavior: on a live-keys deployment a simulated machine is not enrolled, not listed and not matched', async (t) => {
  const cp = await controlPlane(t, { GF_ENVIRONMENT: 'mainnet' });
  t.same((await serviceIndex(cp)).simulatedMachines, { allowed: false });

  t.test('error: forbidden at enrollment, naming the setting; the token stays usable', async (t) => {
    const token = await newEnrollmentToken(cp.db);
    const refused = await enroll(cp, testInventory({ simulated: true }), token);
    t.equal(refused.status, 403);
    const body = (await refused.json()) as { error: { code: string; message: string } };
    t.equal(body.error.code, 'forbidden');
    t.match(body.error.message, /simulated machines .*GF_ALLOW_SIMULATED_MACHINES is off/);
    t.equal((await enroll(cp, realInventory('a100-80gb'), token)).status, 201, 'the same token enrolls a real machine');
  });

  t.test('behavior: a machine whose agent turns simulated is neither verified, listed nor matched, and its operator is told why', async (t) => {
    // A real machine enrolls; its agent comes back in simulated mode.
    const simulated = await connect(t, cp, realInventory('rtx-4090-24gb'), testInventory({ simulated: true, gpus: 1 }));
    const status = await fetch(`${cp.url}${AGENT_MACHINE_PATH}`, { headers: bearer(simulated.machineToken) });
    t.match(JSON.stringify(await status.json()), /GF_ALLOW_SIMULATED_MACHINES is off/, 'gf-agent status tells the operator why');

    // Even marked verified (say, by an earlier deployment that allowed them), it is not offered.
    await cp.db.query(`UPDATE machines SET verification = 'verified', verification_reason = NULL WHERE id = $1`, [simulated.machineId]);
    const real = await connect(t, cp, realInventory('a100-80gb'), realInventory('a100-80gb'));
    await cp.db.query(`UPDATE machines SET verification = 'verified' WHERE id = $1`, [real.machineId]);
    const offers = await capacity(cp);
    t.same(offers.map((o) => ({ gpu: o.gpu.classId, simulated: o.simulated })), [{ gpu: 'a100-80gb', simulated: false }], 'only the real machine is listed');

    // One job only the simulated machine fits, then one the real machine fits: once the second
    // is assigned, a matcher pass saw the first too.
    const key = await createTestKey(cp.db, { environment: 'mainnet' });
    const owner = { accountId: key.accountId, apiKeyId: key.keyId };
    const [onSimulated] = await createQueuedJobs(cp.db, owner, [{ spec: { gpu: { count: 1, modelAllowlist: ['rtx-4090-24gb'] } } }]);
    const [onReal] = await createQueuedJobs(cp.db, owner, [{ spec: { gpu: { count: 1, modelAllowlist: ['a100-80gb'] } } }]);
    await cp.db.query(`SELECT pg_notify('jobs_queued', '')`);
    const { assignment } = await real.agent.next('assign');
    t.equal(assignment.jobId, onReal);
    const job = await fetch(`${cp.url}/v1/jobs/${onSimulated}`, { headers: bearer(key.key) });
    t.equal(job.status, 200);
    t.match(await job.json(), { id: onSimulated, status: 'QUEUED', assignment: null }, 'the job the simulated machine fits stays queued');
    t.notOk(simulated.agent.received.some((m) => m.type === 'assign'), 'the simulated machine got no assignment');

    const record = await fetch(`${cp.url}/admin/v1/machines/${simulated.machineId}`, { headers: bearer(ADMIN_TOKEN) });
    t.match(await record.json(), { simulated: true });
  });
});

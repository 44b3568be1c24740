import { createHash, generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import t, { type Test } from 'tap';
import {
  AGENT_PROTOCOL_VERSION,
  jobSchema,
  logListSchema,
  type AssignmentSpec,
  type EnrollRequest,
  type Job,
  type MachineInventory,
  VERIFICATION_LEVEL_TEXT,
  VERIFICATION_LEVELS,
  verificationLevelDescription,
} from '@gpufarm/shared';
import { argvSha256, canaryResult, signRecord, type ExecutionRecord } from '@gpufarm/shared/node';
import { matchQueuedJobs } from '../src/matching/matcher.js';
import { buildOpenApiDocument } from '../src/openapi/document.js';
import { bearer, createTestKey } from './helpers/app.js';
import { AgentSocket, hello, newEnrollmentToken, runChallenge, startGatewayApp, TEST_CANARY_IMAGE, TEST_CHALLENGE_PLAN, testInventory, type GatewayTestApp } from './helpers/agent-client.js';
import { tarOf } from './helpers/uploads.js';

/**
 * Each verification level through the real server: a customer's job created with
 * `POST /v1/jobs`, matched by the real matcher, run by a test agent over the agent WebSocket
 * (its outputs and log uploaded over HTTP with its machine token, its execution record signed
 * with the key it enrolled), settled by the real lifecycle and read back with `GET /v1/jobs/:id`.
 * A level is set only when its evidence holds (docs/verification.md); each case that takes one
 * piece of evidence away reads HOST_REPORTED and its `verified:` line names what was missing.
 */

const BUSYBOX = `127.0.0.1:5000/gpufarm/busybox@sha256:${'b'.repeat(64)}`;
const benchmark = { status: 'completed' as const, reason: null, tier: 'A' as const, host: { diskWriteMBps: 900, sha256MBps: 1500 }, gpus: [], ranAt: new Date().toISOString() };

/** A machine with real GPUs whose probe passed and listed them. */
function realInventory(gpus = 2): MachineInventory {
  const inventory = testInventory({ simulated: false, gpus });
  inventory.health.probeListing = inventory.gpus.map((g) => ({ name: g.name, uuid: g.uuid }));
  return inventory;
}

interface Machine {
  machineId: string;
  machineToken: string;
  agent: AgentSocket;
  key: KeyObject;
}

/** Enrolls a machine with a key pair of this test's (so it can sign records), says hello and passes its GPU challenge. */
async function verifiedMachine(t: Test, s: GatewayTestApp, inventory: MachineInventory): Promise<Machine> {
  const keys = generateKeyPairSync('ed25519');
  const body: EnrollRequest = {
    enrollmentToken: await newEnrollmentToken(s.db, { farmSlug: `levels-${randomBytes(4).toString('hex')}` }),
    publicKeyPem: keys.publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    agentVersion: '0.1.0',
    protocolVersion: AGENT_PROTOCOL_VERSION,
    inventory,
  };
  const res = await s.app.inject({ method: 'POST', url: '/agent/v1/enroll', payload: body });
  if (res.statusCode !== 201) throw new Error(`enroll answered ${res.statusCode}: ${res.body}`);
  const { machineId, machineToken } = res.json() as { machineId: string; machineToken: string };
  const agent = await AgentSocket.connect(s.url, machineToken);
  t.teardown(() => agent.close());
  agent.send(hello(inventory, [], { benchmark: inventory.simulated ? null : benchmark }));
  await agent.next('welcome');
  await runChallenge(agent);
  await s.offerIndex.refresh();
  return { machineId, machineToken, agent, key: keys.privateKey };
}

/** How the test machine plays one run; every default is the honest run. */
interface Play {
  /** The tar of `/output` as uploaded (entries in order). */
  output?: ReadonlyArray<readonly [string, string]>;
  /** The hash the machine declares for its output (default: the true one). */
  declaredOutputSha256?: string;
  /** The digest the machine says it ran (default: the assignment's). */
  ranDigest?: string | null;
  /** The record to sign, from the honest one (default: unchanged); null sends none. */
  record?: ((honest: ExecutionRecord) => ExecutionRecord) | null;
  /** Signs with this key instead of the enrolled one. */
  signWith?: KeyObject;
  /** Done while the job runs, before the results go up. */
  whileRunning?: (assignment: AssignmentSpec) => Promise<void>;
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

async function upload(s: GatewayTestApp, m: Machine, assignmentId: string, name: string, body: Buffer, declared: string): Promise<void> {
  const res = await fetch(`${s.url}/agent/v1/assignments/${assignmentId}/outputs/${name}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${m.machineToken}`, 'content-type': 'application/octet-stream', 'x-content-sha256': declared },
    body,
  });
  if (res.status !== 201) throw new Error(`the upload of ${name} answered ${res.status}: ${await res.text()}`);
}

interface Ran {
  job: Job;
  /** The service's `verified:` line. */
  verified: string;
}

/**
 * Creates the job through `POST /v1/jobs`, funds it the way fund-confirm does once the chain
 * holds the payment (QUEUED), matches it, plays the machine's part and returns the job as the
 * customer reads it.
 */
async function runJob(s: GatewayTestApp, m: Machine, spec: Record<string, unknown>, play: Play = {}): Promise<Ran> {
  const key = await createTestKey(s.db);
  const created = await s.app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key.key), payload: { gpu: { count: 1 }, workloadType: 'batch', maxRuntimeSeconds: 600, ...spec } });
  if (created.statusCode !== 201) throw new Error(`POST /v1/jobs answered ${created.statusCode}: ${created.body}`);
  const jobId = (created.json() as { job: { id: string } }).job.id;
  await s.db.query(`UPDATE jobs SET status = 'QUEUED' WHERE id = $1 AND status = 'CREATED'`, [jobId]);
  const matched = await matchQueuedJobs({ db: s.db }, { allowSimulated: s.config.execution.allowSimulatedMachines });
  if (!matched.matched.some((j) => j.jobId === jobId)) throw new Error(`job ${jobId} was not matched`);

  const { assignment } = await m.agent.next('assign', (a) => a.assignment.jobId === jobId);
  const id = assignment.assignmentId;
  const ranDigest = play.ranDigest === undefined ? assignment.imageDigest : play.ranDigest;
  const startedAt = new Date(Date.now() - 90_000).toISOString();
  m.agent.send({ type: 'assignment.accepted', assignmentId: id });
  const base = { type: 'assignment.status' as const, assignmentId: id, imageDigest: ranDigest, startedAt, failure: null, lastLogSeq: null };
  m.agent.send({ ...base, state: 'running', at: startedAt, finishedAt: null, exitCode: null, oomKilled: null, timedOut: null, outputs: null, log: null, record: null });
  await m.agent.barrier();
  await play.whileRunning?.(assignment);

  const output = await tarOf(play.output ?? [['result.txt', 'done\n']]);
  const outputSha256 = sha256(output);
  await upload(s, m, id, 'output-0', output, play.declaredOutputSha256 ?? outputSha256);
  const log = Buffer.from('{"seq":0,"stream":"stdout","line":"done"}\n');
  await upload(s, m, id, 'log', log, sha256(log));
  const finishedAt = new Date().toISOString();
  const honest: ExecutionRecord = {
    version: 1,
    assignmentId: id,
    jobId,
    imageDigest: ranDigest ?? '',
    argvSha256: argvSha256(assignment.command),
    startedAt,
    finishedAt,
    exitCode: 0,
    oomKilled: false,
    timedOut: false,
    outputs: [{ path: '/output', sha256: play.declaredOutputSha256 ?? outputSha256, sizeBytes: output.length }],
    log: { sha256: sha256(log), sizeBytes: log.length },
  };
  const record = play.record === null ? null : signRecord(play.record ? play.record(honest) : honest, play.signWith ?? m.key);
  m.agent.send({
    ...base,
    state: 'finished',
    at: finishedAt,
    finishedAt,
    exitCode: 0,
    oomKilled: false,
    timedOut: false,
    outputs: [{ path: '/output', name: 'output-0', sha256: play.declaredOutputSha256 ?? outputSha256, sizeBytes: output.length }],
    log: { sha256: sha256(log), sizeBytes: log.length },
    record,
  });
  await m.agent.barrier();

  const job = jobSchema.parse((await s.app.inject({ url: `/v1/jobs/${jobId}`, headers: bearer(key.key) })).json());
  const lines = logListSchema.parse((await s.app.inject({ url: `/v1/jobs/${jobId}/logs?stream=system&limit=1000`, headers: bearer(key.key) })).json()).data;
  const verified = lines.map((l) => l.line).find((l) => l.startsWith('verified:'));
  if (job.status !== 'COMPLETED' || verified === undefined) throw new Error(`job ${jobId} did not complete: ${JSON.stringify(job)} ${JSON.stringify(lines)}`);
  return { job, verified };
}

const busybox = { image: BUSYBOX, command: ['sh', '-c', 'echo done > /output/result.txt'] };
const canary = (iterations = 1000) => ({ image: TEST_CANARY_IMAGE, command: ['sha256-chain', String(iterations)], deterministic: true });

t.test('verification levels on a machine with verified GPUs', async (t) => {
  const s = await startGatewayApp(t, { env: { GF_CANARY_IMAGE: TEST_CANARY_IMAGE }, challengePlan: TEST_CHALLENGE_PLAN });
  const m = await verifiedMachine(t, s, realInventory());

  await t.test('EXECUTION_VERIFIED: hashes match, the pinned digest ran, the enrolled key signed a record that agrees with the report', async (t) => {
    const { job, verified } = await runJob(s, m, busybox);
    t.equal(job.verificationLevel, 'EXECUTION_VERIFIED');
    t.equal(job.result?.hashesMatch, true);
    t.match(verified, /^verified: EXECUTION_VERIFIED \(hashes match, and the machine's enrolled key signed a record of running the pinned image that agrees with its report\)/);
  });

  // Each case takes one piece of EXECUTION_VERIFIED's evidence away.
  const missing: Array<[string, Record<string, unknown>, Play, RegExp]> = [
    ['no signed record', busybox, { record: null }, /the machine sent no signed execution record/],
    ['a record signed by another key', busybox, { signWith: generateKeyPairSync('ed25519').privateKey }, /signature does not verify with the machine's enrolled key/],
    ['an image not pinned by digest', { ...busybox, image: '127.0.0.1:5000/gpufarm/busybox:latest' }, {}, /the job did not pin its image by digest/],
    ['another digest run than the pinned one', busybox, { ranDigest: `sha256:${'d'.repeat(64)}` }, /the machine reports running sha256:d{64}, not the pinned/],
    ['a record naming another digest', busybox, { record: (r) => ({ ...r, imageDigest: `sha256:${'d'.repeat(64)}` }) }, /differs from the machine's report \(image digest\)/],
    ['a record of another command', busybox, { record: (r) => ({ ...r, argvSha256: argvSha256(['true']) }) }, /differs from the machine's report \(command\)/],
    ['a record with another start than the one reported (and billed)', busybox, { record: (r) => ({ ...r, startedAt: new Date(Date.parse(r.startedAt) - 86_400_000).toISOString() }) }, /differs from the machine's report \(start\)/],
    ['a record with another finish', busybox, { record: (r) => ({ ...r, finishedAt: new Date(Date.parse(r.finishedAt) + 60_000).toISOString() }) }, /differs from the machine's report \(finish\)/],
    ['a record that says the job timed out', busybox, { record: (r) => ({ ...r, timedOut: true }) }, /differs from the machine's report \(timeout\)/],
    ['a record that says the job was killed for memory', busybox, { record: (r) => ({ ...r, oomKilled: true }) }, /differs from the machine's report \(OOM kill\)/],
    ['a record of another log than the one stored', busybox, { record: (r) => ({ ...r, log: { sha256: 'e'.repeat(64), sizeBytes: 1 } }) }, /differs from the machine's report \(log\)/],
    ['a record with an output the machine did not report', busybox, { record: (r) => ({ ...r, outputs: [...r.outputs, { path: '/output/extra', sha256: 'e'.repeat(64), sizeBytes: 1 }] }) }, /differs from the machine's report \(outputs\)/],
  ];
  for (const [what, spec, play, why] of missing) {
    await t.test(`HOST_REPORTED, not EXECUTION_VERIFIED: ${what}`, async (t) => {
      const { job, verified } = await runJob(s, m, spec, play);
      t.equal(job.verificationLevel, 'HOST_REPORTED');
      t.equal(job.result?.hashesMatch, true, 'the stored bytes are the ones the machine hashed');
      t.match(verified, /^verified: HOST_REPORTED \(as the machine reports it: /);
      t.match(verified, why);
    });
  }

  await t.test('HOST_REPORTED: an output whose stored bytes differ from the hash the machine reported (and signed)', async (t) => {
    const { job, verified } = await runJob(s, m, busybox, { declaredOutputSha256: 'f'.repeat(64) });
    t.equal(job.verificationLevel, 'HOST_REPORTED');
    t.same([job.result?.hostHash, job.result?.hashesMatch], ['f'.repeat(64), false]);
    t.match(verified, /an output the machine reported differs from the bytes the server stored/);
  });

  await t.test('RESULT_VERIFIED: the canary\'s result.txt, recomputed by the server, is the whole stored output', async (t) => {
    let jobId = '';
    const { job, verified } = await runJob(s, m, canary(), {
      record: null,
      whileRunning: async (a) => void (jobId = a.jobId),
      get output() {
        return [['result.txt', canaryResult(jobId, 1000)] as const];
      },
    });
    t.equal(job.verificationLevel, 'RESULT_VERIFIED', 'no signed record needed: the result itself was checked');
    t.match(verified, /^verified: RESULT_VERIFIED \(the server recomputed the canary's result\.txt and the stored output holds exactly that\)/);
  });

  const wrongCanary: Array<[string, (jobId: string) => ReadonlyArray<readonly [string, string]>, Play, RegExp]> = [
    ['a result the server computes differently', (id) => [['result.txt', canaryResult(id, 999)]], {}, /does not match the server's recomputation/],
    // tar readers keep the last of two entries: the customer would extract the wrong one.
    ['result.txt twice, the right one first and another after it', (id) => [['result.txt', canaryResult(id, 1000)], ['result.txt', `${'0'.repeat(64)}\n`]], {}, /does not hold result\.txt alone/],
    ['the right result.txt beside a file the check does not cover', (id) => [['result.txt', canaryResult(id, 1000)], ['model.bin', 'unchecked bytes']], {}, /does not hold result\.txt alone/],
    ['the right result.txt under a stored hash other than the reported one', (id) => [['result.txt', canaryResult(id, 1000)]], { declaredOutputSha256: 'f'.repeat(64) }, /an output the machine reported differs/],
  ];
  for (const [what, output, play, why] of wrongCanary) {
    await t.test(`HOST_REPORTED, not RESULT_VERIFIED: the canary with ${what}`, async (t) => {
      // The canary's job id goes into its chain: the tar is made once the assignment names it.
      let jobId = '';
      const { job, verified } = await runJob(s, m, canary(), {
        ...play,
        whileRunning: async (a) => void (jobId = a.jobId),
        get output() {
          return output(jobId);
        },
      });
      t.equal(job.verificationLevel, 'HOST_REPORTED');
      t.match(verified, why);
    });
  }

  await t.test('HOST_REPORTED, not EXECUTION_VERIFIED: the machine\'s GPUs changed during the run, so its verification no longer stands', async (t) => {
    const grown = realInventory(3);
    const { job, verified } = await runJob(s, m, busybox, {
      whileRunning: async (a) => {
        m.agent.send({ type: 'heartbeat', sentAt: new Date().toISOString(), health: grown.health, gpus: [], inventory: grown, runningAssignmentIds: [a.assignmentId], draining: false });
        await m.agent.barrier();
      },
    });
    t.equal(job.verificationLevel, 'HOST_REPORTED');
    t.match(verified, /the machine's GPU verification did not hold over the whole run \(now unverified\)/);
  });
});

t.test('verification levels on a simulated machine', async (t) => {
  const s = await startGatewayApp(t, { env: { GF_CANARY_IMAGE: TEST_CANARY_IMAGE }, challengePlan: TEST_CHALLENGE_PLAN });
  const m = await verifiedMachine(t, s, testInventory({ simulated: true }));

  await t.test('HOST_REPORTED, not EXECUTION_VERIFIED: a simulated machine has no GPUs the service verified, whatever it signs', async (t) => {
    const { job, verified } = await runJob(s, m, busybox);
    t.equal(job.verificationLevel, 'HOST_REPORTED');
    t.match(verified, /the machine is simulated: it has no GPUs the service verified/);
  });

  await t.test('RESULT_VERIFIED: a recomputed result does not depend on the machine', async (t) => {
    let jobId = '';
    const { job } = await runJob(s, m, canary(), {
      whileRunning: async (a) => void (jobId = a.jobId),
      get output() {
        return [['result.txt', canaryResult(jobId, 1000)] as const];
      },
    });
    t.equal(job.verificationLevel, 'RESULT_VERIFIED');
  });
});


t.test('docs: docs/verification.md, docs/API.md, the OpenAPI description and the job page say what VERIFICATION_LEVEL_TEXT says', async (t) => {
  const flat = (text: string) => text.replace(/^> ?/gm, '').replace(/\s+/g, ' ');
  const doc = flat(readFileSync(new URL('../../docs/verification.md', import.meta.url), 'utf8'));
  for (const level of VERIFICATION_LEVELS) {
    const text = VERIFICATION_LEVEL_TEXT[level];
    t.ok(doc.includes(text.attests), `docs/verification.md says what ${level} attests`);
    t.ok(doc.includes(text.doesNotAttest), `docs/verification.md says what ${level} does not attest`);
  }
  t.match(readFileSync(new URL('../../docs/API.md', import.meta.url), 'utf8'), /docs\/verification\.md/, 'the API reference points there');
  const document = buildOpenApiDocument('http://127.0.0.1:8080') as { components: { schemas: Record<string, { properties?: Record<string, { description?: string }> }> } };
  const described = Object.values(document.components.schemas).map((s) => s.properties?.verificationLevel?.description).find((d) => d !== undefined);
  t.equal(described, `Null before a result exists; never assumed.\n\n${verificationLevelDescription()}`, 'the OpenAPI document describes verificationLevel in the same words');
  t.match(readFileSync(new URL('../../web/src/areas/customer/job-page.tsx', import.meta.url), 'utf8'), /VERIFICATION_LEVEL_TEXT\[level\]/, 'the job page shows the same words (test/dashboard-customer.test.ts reads them on the page)');
});

import { randomBytes } from 'node:crypto';
import { AGENT_PROTOCOL_VERSION, pickOpenings, SIMULATED_CHALLENGE, type AgentMessage, type AssignmentSpec } from '@gpufarm/shared';
import { checkOpenings } from '@gpufarm/shared/node';
import t, { type Test } from 'tap';
import type { ChallengeStarter } from '../src/challenge/challenge.js';
import { cpuChallenge } from '../src/challenge/cpu-challenge.js';
import type { AssignmentRunner } from '../src/link/assignment-runner.js';
import { holdingRunner, testDaemon } from './helpers/daemon.js';
import { TestPeer } from './helpers/peer.js';

/**
 * The GPU challenge over the link: a scripted control plane (`TestPeer`) sends
 * challenge.prepare/go/open/cancel to a real agent on simulated GPUs and holds its commitment and
 * openings to the server's check; a challenge never runs beside a job.
 */

const GPUS = [{ index: 0, uuid: 'GPU-sim-l4-24gb-0' }, { index: 1, uuid: 'GPU-sim-l4-24gb-1' }];
const GO = 'c3'.repeat(32);

const prepare = (challengeId: string, over: { rounds?: number } = {}) => ({
  type: 'challenge.prepare' as const, challengeId, gpus: GPUS, ...SIMULATED_CHALLENGE, ...over, preSeed: 'd4'.repeat(32), simulated: true,
});

const assignment = (id: string): AssignmentSpec => ({
  assignmentId: id, jobId: `job_${id}`, image: '127.0.0.1:5000/gpufarm/busybox:1', imageDigest: null, command: ['true'], env: {},
  gpus: [GPUS[0]!], cpuCores: null, ramBytes: null, maxRuntimeSeconds: 60, networkPolicy: { mode: 'none' }, inputs: [],
  outputRules: [{ path: '/output', maxBytes: 1024 }],
});

/** Simulated challenges, and a promise of the first step that ends because it was cancelled (the spy never changes a result). */
function watchedChallenges(): { start: ChallengeStarter; stepCancelled: Promise<void> } {
  let seen!: () => void;
  const stepCancelled = new Promise<void>((resolve) => (seen = resolve));
  const watch = <T>(step: Promise<T>) => step.catch((err: { code?: string }) => {
    if (err.code === 'challenge_cancelled') seen();
    throw err;
  });
  const start: ChallengeStarter = (spec) => {
    const run = cpuChallenge(spec);
    return { prepare: () => watch(run.prepare()), go: (seed) => watch(run.go(seed)), open: (rows) => watch(run.open(rows)), cancel: () => run.cancel() };
  };
  return { start, stepCancelled };
}

async function started(t: Test, options: { versions?: number[]; runner?: AssignmentRunner; challenges?: ChallengeStarter; holdSeconds?: number } = {}) {
  const peer = await TestPeer.start(options.versions ? { versions: options.versions } : {});
  t.teardown(() => peer.close());
  const { machineToken } = peer.addMachine(`m_${randomBytes(3).toString('hex')}`);
  const agent = testDaemon({ server: peer.url, machineToken, simulate: '2x l4-24gb', ...(options.runner ? { runner: options.runner } : {}), ...(options.challenges ? { challenges: options.challenges } : {}), ...(options.holdSeconds ? { daemon: { challengeHoldSeconds: options.holdSeconds } } : {}) });
  t.teardown(agent.cleanup);
  await agent.daemon.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');
  return { peer, agent };
}

const challengeMessages = (peer: TestPeer) => peer.received.filter((m): m is Extract<AgentMessage, { type: `challenge.${string}` }> => m.type.startsWith('challenge.'));

t.test('default: prepare, go and open on a simulated machine: its commitment and openings pass the server\'s check', async (t) => {
  const { peer, agent } = await started(t);
  t.equal(peer.messages('hello')[0]!.protocolVersion, AGENT_PROTOCOL_VERSION, 'the agent speaks the latest protocol');
  const p = prepare('chl_honest');
  peer.send(p);
  await peer.waitFor(() => peer.messages('challenge.ready').length === 1, 'ready');
  peer.send({ type: 'challenge.go', challengeId: 'chl_honest', seed: GO });
  await peer.waitFor(() => peer.messages('challenge.commit').length === 1, 'commit');
  const commit = peer.messages('challenge.commit')[0]!;
  t.same(commit.gpus.map((g) => g.uuid), GPUS.map((g) => g.uuid));
  const rows = GPUS.flatMap((g) => pickOpenings({ ...SIMULATED_CHALLENGE, checks: 16 }, (max) => Math.floor(Math.random() * max)).map((o) => ({ uuid: g.uuid, ...o })));
  peer.send({ type: 'challenge.open', challengeId: 'chl_honest', rows });
  await peer.waitFor(() => peer.messages('challenge.openings').length === 1, 'openings');
  const { openings } = peer.messages('challenge.openings')[0]!;
  t.same(openings.map((o) => [o.uuid, o.round, o.row]), rows.map((r) => [r.uuid, r.round, r.row]), 'in the order asked');
  const hashes = (hex: string) => Array.from({ length: hex.length / 64 }, (_, i) => Buffer.from(hex.slice(i * 64, i * 64 + 64), 'hex'));
  for (const g of commit.gpus) {
    const check = checkOpenings({
      preSeed: Buffer.from(p.preSeed, 'hex'), goSeed: Buffer.from(GO, 'hex'), gpu: g.uuid, m: p.m, n: p.n, k: p.k, roots: hashes(g.roots),
      openings: openings.filter((o) => o.uuid === g.uuid).map((o) => ({ round: o.round, row: o.row, path: hashes(o.path) })),
    });
    t.equal(check, null, `${g.uuid}: the server's check passes`);
  }
  t.same(challengeMessages(peer).map((m) => m.type), ['challenge.ready', 'challenge.commit', 'challenge.openings'], 'nothing else was sent');
  const lines = agent.logs.filter((l) => l.startsWith('challenge chl_honest'));
  t.match(lines, [/^challenge chl_honest: started on 2 GPUs \(simulated: on the CPU\), 256x256x256, 4 rounds; assignments are refused until it ends$/, /^challenge chl_honest: openings sent \(after [0-9.]+ s\); its GPUs are free$/]);
  t.equal(lines.length, 2, 'one line at its start, one at its end');
  t.equal(peer.invalid.length, 0);
});

t.test('behavior: prepare while an assignment runs is refused, and an assign during a challenge is rejected', async (t) => {
  const { runner, held } = holdingRunner();
  const { peer, agent } = await started(t, { runner });
  peer.assign(assignment('asg_busy'));
  await peer.waitFor(() => peer.messages('assignment.accepted').length === 1, 'accepted');
  peer.send(prepare('chl_busy'));
  await peer.waitFor(() => peer.messages('challenge.failed').length === 1, 'failed');
  t.same(peer.messages('challenge.failed')[0], { type: 'challenge.failed', challengeId: 'chl_busy', reason: 'a job holds the GPUs (assignment asg_busy)' });

  // The job ends; now the machine takes the challenge, and no assignment while it runs.
  held.get('asg_busy')!.ctx.report({ state: 'finished', imageDigest: null, startedAt: null, finishedAt: null, exitCode: 0, oomKilled: false, timedOut: false, failure: null, outputs: [], record: null, lastLogSeq: null });
  held.delete('asg_busy');
  await peer.waitFor(() => agent.daemon.status.running.length === 0, 'the assignment released');
  peer.send(prepare('chl_free'));
  await peer.waitFor(() => peer.messages('challenge.ready').length === 1, 'ready');
  peer.assign(assignment('asg_during'));
  await peer.waitFor(() => peer.messages('assignment.rejected').length === 1, 'rejected');
  t.same(peer.messages('assignment.rejected')[0], {
    type: 'assignment.rejected', assignmentId: 'asg_during', reason: 'gpus_unavailable',
    message: 'a GPU challenge (chl_free) is running on this machine\'s GPUs; it takes no assignment until the challenge ends',
  });
  t.equal(held.size, 0, 'the runner never saw it');
  peer.send(prepare('chl_second'));
  await peer.waitFor(() => peer.messages('challenge.failed').length === 2, 'second refused');
  t.match(peer.messages('challenge.failed')[1], { challengeId: 'chl_second', reason: 'another GPU challenge (chl_free) is running on this machine' });
  t.equal(peer.invalid.length, 0);
});

t.test('behavior: cancel stops the chain, sends nothing more for it, and the machine takes assignments again', async (t) => {
  const { runner, held } = holdingRunner();
  const watched = watchedChallenges();
  const { peer, agent } = await started(t, { runner, challenges: watched.start });
  // Long enough to be running when the cancel comes: 128 rounds of two GPUs take seconds on the CPU (the most a simulated challenge takes).
  peer.send(prepare('chl_cancel', { rounds: 128 }));
  await peer.waitFor(() => peer.messages('challenge.ready').length === 1, 'ready');
  peer.send({ type: 'challenge.go', challengeId: 'chl_cancel', seed: GO });
  await new Promise((r) => setTimeout(r, 200));
  peer.send({ type: 'challenge.cancel', challengeId: 'chl_cancel', reason: 'the deadline passed' });
  await watched.stepCancelled;
  t.match(agent.logs.filter((l) => l.startsWith('challenge chl_cancel')).at(-1), /^challenge chl_cancel: cancelled by the control plane: the deadline passed \(after [0-9.]+ s\)/);
  peer.assign(assignment('asg_after'));
  await peer.waitFor(() => peer.messages('assignment.accepted').length === 1, 'accepted after the cancel');
  t.ok(held.has('asg_after'));
  t.same(challengeMessages(peer).map((m) => m.type), ['challenge.ready'], 'no commit, no failure for a cancelled challenge');
  // Steps for a challenge that ended are answered as such.
  peer.send({ type: 'challenge.open', challengeId: 'chl_cancel', rows: [{ uuid: GPUS[0]!.uuid, round: 0, row: 0 }] });
  await peer.waitFor(() => peer.messages('challenge.failed').length === 1, 'failed');
  t.match(peer.messages('challenge.failed')[0], { challengeId: 'chl_cancel', reason: /^no challenge chl_cancel runs on this machine/ });
});

t.test('behavior: a link that goes down stops the challenge; after the reconnect its go is answered as failed', async (t) => {
  const watched = watchedChallenges();
  const { peer, agent } = await started(t, { challenges: watched.start });
  peer.send(prepare('chl_drop', { rounds: 128 }));
  await peer.waitFor(() => peer.messages('challenge.ready').length === 1, 'ready');
  peer.send({ type: 'challenge.go', challengeId: 'chl_drop', seed: GO });
  await new Promise((r) => setTimeout(r, 200));
  peer.dropAll();
  await watched.stepCancelled;
  t.match(agent.logs.filter((l) => l.startsWith('challenge chl_drop')).at(-1), /^challenge chl_drop: stopped: the link to the control plane went down/);
  await peer.waitFor(() => peer.messages('hello').length === 2, 'reconnected');
  peer.send({ type: 'challenge.go', challengeId: 'chl_drop', seed: GO });
  await peer.waitFor(() => peer.messages('challenge.failed').length === 1, 'failed');
  t.equal(peer.messages('challenge.commit').length, 0);
});

t.test('error: rows the challenge has not, and steps out of order, fail it with the reason', async (t) => {
  const { peer } = await started(t);
  peer.send(prepare('chl_rows'));
  await peer.waitFor(() => peer.messages('challenge.ready').length === 1, 'ready');
  peer.send({ type: 'challenge.go', challengeId: 'chl_rows', seed: GO });
  await peer.waitFor(() => peer.messages('challenge.commit').length === 1, 'commit');
  peer.send({ type: 'challenge.open', challengeId: 'chl_rows', rows: [{ uuid: GPUS[1]!.uuid, round: 4, row: 0 }] });
  await peer.waitFor(() => peer.messages('challenge.failed').length === 1, 'failed');
  t.same(peer.messages('challenge.failed')[0], {
    type: 'challenge.failed', challengeId: 'chl_rows',
    reason: 'cannot open GPU-sim-l4-24gb-1 round 4 row 0: the challenge has 4 rounds of 256 rows on GPU-sim-l4-24gb-0, GPU-sim-l4-24gb-1',
  });
  peer.send(prepare('chl_order'));
  await peer.waitFor(() => peer.messages('challenge.ready').length === 2, 'ready');
  peer.send({ type: 'challenge.open', challengeId: 'chl_order', rows: [{ uuid: GPUS[0]!.uuid, round: 0, row: 0 }] });
  await peer.waitFor(() => peer.messages('challenge.failed').length === 2, 'failed');
  t.match(peer.messages('challenge.failed')[1], { challengeId: 'chl_order', reason: 'open came while the machine was at another step (ready)' });
  const real = { ...prepare('chl_real'), simulated: false, gpus: [{ index: 0, uuid: 'GPU-2c1e6a2f-63c4-9a2b-6f56-5c1de4c7c7a0' }] };
  peer.send(real);
  await peer.waitFor(() => peer.messages('challenge.failed').length === 3, 'failed');
  t.match(peer.messages('challenge.failed')[2], { challengeId: 'chl_real', reason: 'this machine runs simulated GPUs: it has no real GPU to challenge' });
});

t.test('behavior: a challenge the control plane leaves hanging is stopped after the hold limit, and the machine takes jobs again', async (t) => {
  const { runner, held } = holdingRunner();
  const { peer } = await started(t, { runner, holdSeconds: 0.5 });
  peer.send(prepare('chl_hang'));
  await peer.waitFor(() => peer.messages('challenge.failed').length === 1, 'failed');
  t.same(peer.messages('challenge.failed')[0], { type: 'challenge.failed', challengeId: 'chl_hang', reason: 'the challenge held the machine for 0.5 s without the control plane finishing it: stopped, so the machine takes jobs again' });
  t.equal(peer.messages('challenge.ready').length, 1, 'it was ready, and no go came');
  peer.assign(assignment('asg_next'));
  await peer.waitFor(() => peer.messages('assignment.accepted').length === 1, 'accepted');
  t.ok(held.has('asg_next'));
});

t.test('behavior: on a link of protocol 6 the challenge messages are ignored and none is sent', async (t) => {
  const { peer, agent } = await started(t, { versions: [1, 2, 3, 4, 5, 6] });
  peer.send(prepare('chl_old'));
  peer.send({ type: 'challenge.go', challengeId: 'chl_old', seed: GO });
  await new Promise((r) => setTimeout(r, 300));
  t.same(challengeMessages(peer), [], 'nothing sent');
  t.match(agent.logs.filter((l) => l.includes('chl_old') || l.startsWith('ignored challenge')), [/^ignored challenge\.prepare: the link speaks protocol 6, and the GPU challenge needs 7$/, /^ignored challenge\.go/]);
});

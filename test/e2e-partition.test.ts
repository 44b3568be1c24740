import { execFile, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { promisify } from 'node:util';
import t from 'tap';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { jsonLogLines } from '@gpufarm/shared';
import { enrollAgent } from './helpers/agent.js';
import { Customer, linesOf } from './helpers/customer.js';
import { busyboxSpec } from './helpers/jobs.js';
import { Marketplace } from './helpers/marketplace.js';
import { TcpProxy } from './helpers/tcp-proxy.js';
import { until } from './helpers/wait.js';

/**
 * End to end, separate processes: a machine cut off from the control plane by a network
 * partition (a TCP proxy that stops forwarding without closing anything) for longer than the
 * control plane waits before it requeues the machine's jobs (offline after 3 s without a
 * heartbeat, requeued 20 s later). The job must not run on two machines at once: the cut-off
 * agent stops its container before the control plane can requeue it (its grace comes from the
 * control plane's `welcome`), the job is requeued onto the other machine of the farm and
 * completes there, only that run's results are accepted, and the cut-off machine's GPU is not
 * given to another job while its agent still holds the old one.
 */

// Separate processes, real containers and a chain: minutes, not the default two.
t.setTimeout(300_000);

const run = promisify(execFile);

interface ContainerFacts {
  id: string;
  owner: string;
  running: boolean;
  /** Null until the container started (Docker reports year 1 for a container only created). */
  startedAt: number | null;
  finishedAt: number | null;
}

/** The containers of `jobId` on every machine (from the runtime's labels), as dockerd reports them. */
async function containersOf(jobId: string): Promise<ContainerFacts[]> {
  const { stdout } = await run('docker', ['ps', '-aq', '--filter', `label=org.gpufarm.job=${jobId}`]);
  const ids = stdout.split('\n').filter(Boolean);
  if (ids.length === 0) return [];
  const { stdout: json } = await run('docker', ['inspect', ...ids]);
  const inspected = JSON.parse(json) as Array<{ Id: string; Config: { Labels: Record<string, string> }; State: { Running: boolean; StartedAt: string; FinishedAt: string } }>;
  return inspected.map((c) => ({
    id: c.Id,
    owner: c.Config.Labels['org.gpufarm.owner'] ?? '',
    running: c.State.Running,
    startedAt: c.State.StartedAt.startsWith('0001-') ? null : Date.parse(c.State.StartedAt),
    finishedAt: c.State.FinishedAt.startsWith('0001-') ? null : Date.parse(c.State.FinishedAt),
  }));
}

interface ContainerEvent {
  action: 'start' | 'die';
  id: string;
  owner: string;
  jobId: string;
  atNs: bigint;
}

/**
 * Every start and death of the runtime's containers from now on, as dockerd reports them
 * (`docker events`): containers the agents remove after their upload still leave their times.
 */
function watchContainers(): { events: ContainerEvent[]; stop: () => void } {
  const events: ContainerEvent[] = [];
  const child = spawn('docker', ['events', '--filter', 'type=container', '--filter', 'event=start', '--filter', 'event=die', '--filter', 'label=org.gpufarm.managed=true', '--format', '{{json .}}'], { stdio: ['ignore', 'pipe', 'ignore'] });
  createInterface({ input: child.stdout }).on('line', (line) => {
    const e = JSON.parse(line) as { Action: string; id: string; timeNano: number | string; Actor: { Attributes: Record<string, string> } };
    if (e.Action !== 'start' && e.Action !== 'die') return;
    events.push({ action: e.Action, id: e.id, owner: e.Actor.Attributes['org.gpufarm.owner'] ?? '', jobId: e.Actor.Attributes['org.gpufarm.job'] ?? '', atNs: BigInt(e.timeNano) });
  });
  return { events, stop: () => child.kill() };
}

/** Runs (start to death) from container events; a run without its death yet ends never. */
function runsOf(events: ContainerEvent[], keep: (e: ContainerEvent) => boolean): Array<{ id: string; owner: string; jobId: string; start: bigint; end: bigint | null }> {
  const runs = new Map<string, { id: string; owner: string; jobId: string; start: bigint; end: bigint | null }>();
  for (const e of events.filter(keep)) {
    if (e.action === 'start') runs.set(e.id, { id: e.id, owner: e.owner, jobId: e.jobId, start: e.atNs, end: null });
    else if (runs.has(e.id)) runs.get(e.id)!.end = e.atNs;
  }
  return [...runs.values()].sort((x, y) => (x.start < y.start ? -1 : 1));
}

/** Whether two runs overlap in time. */
const overlap = (x: { start: bigint; end: bigint | null }, y: { start: bigint; end: bigint | null }) => (x.end === null || y.start < x.end) && (y.end === null || x.start < y.end);

const FARM = 'e2e-partition-farm';
const docker = watchContainers();
t.teardown(() => docker.stop());
const market = await Marketplace.start(t, { env: { GF_MACHINE_OFFLINE_SECONDS: '3', GF_MACHINE_LOST_GRACE_SECONDS: '20', GF_EXECUTION_SWEEP_MS: '250' } });
const proxy = await TcpProxy.start(market.url);
t.teardown(() => proxy.close());
const payout = privateKeyToAddress(generatePrivateKey());
// Machine A reaches the control plane only through the proxy; machine B directly.
const agentA = await enrollAgent(market, { name: 'agent-a', farm: FARM, payout, env: { GF_AGENT_SERVER: proxy.url } });
const agentB = await enrollAgent(market, { name: 'agent-b', farm: FARM, payout });
agentA.start();
await market.waitForCapacity(FARM, 1);
const customer = await Customer.create(market, 1);

t.test('behavior: a partition longer than the requeue: the job runs on one machine at a time, one run is accepted, no GPU is given twice', async (t) => {
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, 'echo started; sleep 45; echo done > /output/done.txt; echo done', { title: 'outlives a partition' }));
  const id = created.job.id;
  await customer.waitForStatus(id, ['RUNNING'], 60_000);
  const [onA] = await until(async () => {
    const found = await containersOf(id);
    return found.length === 1 && found[0]!.running ? found : undefined;
  }, 'the job running on machine A');
  t.equal(onA!.owner, agentA.machineId, 'the job started on machine A');

  agentB.start();
  proxy.partition();

  // The control plane requeues the job after A's silence; B is the farm's other machine.
  const [onB] = await until(
    async () => {
      const found = (await containersOf(id)).filter((c) => c.owner === agentB.machineId && c.startedAt !== null);
      return found.length > 0 ? found : undefined;
    },
    'the requeued job to start on machine B',
    { timeoutMs: 120_000, describe: () => market.diagnostics(15) },
  );
  const aWhenBStarted = (await containersOf(id)).find((c) => c.owner === agentA.machineId);
  t.ok(aWhenBStarted, "A's container is still there (its agent cannot report while cut off)");
  t.equal(aWhenBStarted?.running, false, "A's container was stopped before the job started on B");
  t.ok(aWhenBStarted?.finishedAt !== null && aWhenBStarted!.finishedAt! <= onB!.startedAt!, `A's run ended (${aWhenBStarted?.finishedAt}) before B's began (${onB!.startedAt})`);

  // A second job waits while B is busy; A comes back while it waits.
  const second = await customer.createFundedJob(busyboxSpec(market.images, 'echo second; echo second > /output/second.txt', { title: 'after the partition' }));
  proxy.heal();

  const { lines, jobStatus } = await customer.tailLogs(id, { timeoutMs: 150_000 });
  t.equal(jobStatus, 'COMPLETED');
  const job = await customer.getJob(id);
  t.equal(job.assignment?.exitCode, 0, 'the run on B ran to its end');
  t.same(linesOf(lines, 'stdout').map((l) => l.line).slice(-2), ['started', 'done']);
  t.equal(job.artifacts.filter((a) => a.kind === 'output').length, 1, 'one output artifact: the run on B');
  t.equal(job.artifacts.filter((a) => a.kind === 'log').length, 1, 'one log artifact: the run on B');
  const outputOwners = new Set(lines.filter((l) => l.stream === 'stdout' && l.line === 'done').map((l) => l.assignmentId));
  t.equal(outputOwners.size, 1, 'one run reached the end');
  t.equal(job.result?.hashesMatch, true);
  // A's run ended (lost) while A was cut off: its last lines may reach the control plane past the
  // grace for an ended assignment, and are then dropped; A's own output says why it stopped.
  t.match(
    jsonLogLines(agentA.current!.output()).find((l) => l.msg.includes('control plane unreachable for 8 s, stopping it')),
    { machineId: agentA.machineId, jobId: id },
    "A's agent stopped its run itself, 8 s into the silence (23 s requeue - 10 s stop - 5 s margin)",
  );

  const secondLines = (await customer.tailLogs(second.created.job.id, { timeoutMs: 150_000 })).lines;
  const secondJob = await customer.getJob(second.created.job.id);
  t.equal(secondJob.status, 'COMPLETED', 'the second job completed');
  t.notOk(
    linesOf(secondLines, 'system').some((l) => l.line.includes('gpus_unavailable')),
    `no machine was offered a GPU its agent still held: ${JSON.stringify(linesOf(secondLines, 'system').map((l) => l.line))}`,
  );

  // From dockerd's own record: the first job ran on A, then on B, never on both at once; each
  // machine (one GPU each) ran one container at a time, the second job's included.
  await until(() => runsOf(docker.events, (e) => e.jobId === id || e.jobId === second.created.job.id).every((r) => r.end !== null) || undefined, 'every run to have ended', { timeoutMs: 60_000 });
  const firstRuns = runsOf(docker.events, (e) => e.jobId === id);
  t.same(firstRuns.map((r) => r.owner), [agentA.machineId, agentB.machineId], 'the first job ran on A, then on B');
  t.notOk(overlap(firstRuns[0]!, firstRuns[1]!), `the first job never ran on two machines at once: ${JSON.stringify(firstRuns, (_, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}`);
  for (const owner of [agentA.machineId, agentB.machineId]) {
    const mine = runsOf(docker.events, (e) => e.owner === owner && (e.jobId === id || e.jobId === second.created.job.id));
    const clash = mine.some((x, i) => mine.slice(i + 1).some((y) => overlap(x, y)));
    t.notOk(clash, `machine ${owner === agentA.machineId ? 'A' : 'B'} ran ${mine.length} container(s), one at a time`);
  }
});

import t from 'tap';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { MACHINE_NOTE_PREFIX } from '@gpufarm/shared';
import { openPostgres } from '@gpufarm/control-plane/db/postgres.js';
import { enrollAgent } from './helpers/agent.js';
import { Marketplace } from './helpers/marketplace.js';
import { until } from './helpers/wait.js';

/**
 * Machine verification across separate processes: the control plane, a real `gf-agent` with
 * simulated GPUs, dockerd and the local registry. A machine is offered only once the canary the
 * control plane put on it passed, and after its GPU set changes only once a new canary passed.
 */

t.setTimeout(300_000);

const FARM = 'e2e-verify';
const PAYOUT = privateKeyToAddress(generatePrivateKey());

interface MachineRecord {
  status: string;
  simulated: boolean;
  verification: { status: string; reason: string | null; canaryJobId: string | null; claims: { gpus: Array<{ uuid: string }> } | null };
}

const market = await Marketplace.start(t);
const agent = await enrollAgent(market, { name: 'agent', farm: FARM, payout: PAYOUT, gpus: '1x rtx-4090-24gb' });
const db = openPostgres(market.databaseUrl, { max: 1 });
t.teardown(() => db.close());

/**
 * Polls until the farm offers `gpus` GPUs, checking at each poll that an offer of that size is
 * only ever listed for a verified machine whose canary covered that many GPUs. Capacity is
 * read before the machine, so a listing seen implies the verification already held then.
 */
async function offeredOnlyOnceVerified(gpus: number): Promise<MachineRecord> {
  let last: unknown = null;
  return until(
    async () => {
      const offers = ((await (await fetch(`${market.url}/v1/capacity?farm=${FARM}`)).json()) as { data: Array<{ count: number; simulated: boolean }> }).data;
      const machine = await market.adminGet<MachineRecord>(`/machines/${agent.machineId}`);
      last = { offers, machine };
      if (!offers.some((o) => o.count === gpus)) return false;
      if (machine.verification.status !== 'verified' || machine.verification.claims?.gpus.length !== gpus) {
        throw new Error(`offered with ${gpus} GPU(s) while ${JSON.stringify(machine.verification)}`);
      }
      return machine;
    },
    `farm ${FARM} to offer ${gpus} GPU(s)`,
    { timeoutMs: 120_000, describe: () => `${JSON.stringify(last)}\n${market.diagnostics(15)}` },
  );
}

interface CanaryRow {
  kind: string;
  status: string;
  verification_level: string | null;
  account_id: string;
  fund_tx_hash: string | null;
}

async function canaryJob(jobId: string): Promise<CanaryRow | undefined> {
  const [row] = await db.query<CanaryRow>('SELECT kind, status, verification_level, account_id, fund_tx_hash FROM jobs WHERE id = $1', [jobId]);
  return row;
}

t.test('default: a newly enrolled machine is offered once the canary the control plane put on it passed', async (t) => {
  t.same((await market.adminGet<MachineRecord>(`/machines/${agent.machineId}`)).verification.status, 'unverified', 'enrolled, not verified');
  agent.start();
  const machine = await offeredOnlyOnceVerified(1);
  t.match(machine, { status: 'online', simulated: true, verification: { status: 'verified', reason: null } });
  const canary = await canaryJob(machine.verification.canaryJobId!);
  t.same(canary, { kind: 'verification', status: 'COMPLETED', verification_level: 'RESULT_VERIFIED', account_id: 'acct_service', fund_tx_hash: null }, 'the server recomputed the sha256 chain the real agent ran');
  const lines = await db.query<{ stream: string; line: string }>(`SELECT stream, line FROM log_lines WHERE job_id = $1 ORDER BY id`, [machine.verification.canaryJobId]);
  t.ok(lines.some((l) => l.stream === 'stderr' && l.line.startsWith(`${MACHINE_NOTE_PREFIX}exited with code 0`)), 'the agent ran it as a job (its own note)');
  t.ok(lines.some((l) => l.stream === 'system' && /^machine verified: the canary result matches/.test(l.line)), 'its log says the machine is verified');
});

t.test('behavior: after its GPU set changed the machine is offered again only once a new canary passed', async (t) => {
  const before = await market.adminGet<MachineRecord>(`/machines/${agent.machineId}`);
  await agent.current!.stop();
  agent.start({ GF_AGENT_SIMULATE_GPUS: '2x rtx-4090-24gb' });
  const machine = await offeredOnlyOnceVerified(2);
  t.not(machine.verification.canaryJobId, before.verification.canaryJobId, 'a new canary');
  t.same(machine.verification.claims?.gpus.map((g) => g.uuid), ['GPU-sim-rtx-4090-24gb-0', 'GPU-sim-rtx-4090-24gb-1']);
  t.match(await canaryJob(machine.verification.canaryJobId!), { status: 'COMPLETED', verification_level: 'RESULT_VERIFIED' });
});

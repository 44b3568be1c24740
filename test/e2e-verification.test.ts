import t from 'tap';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { enrollAgent } from './helpers/agent.js';
import { Marketplace } from './helpers/marketplace.js';
import { until } from './helpers/wait.js';

/**
 * Machine verification across separate processes: the control plane and a real `gf-agent` with
 * simulated GPUs. A machine is offered only once it passed the GPU challenge the control plane put
 * to it (on the CPU for simulated GPUs: the same protocol and check), and after its GPU set
 * changes only once a new one passed.
 */

t.setTimeout(300_000);

const FARM = 'e2e-verify';
const PAYOUT = privateKeyToAddress(generatePrivateKey());

interface MachineRecord {
  status: string;
  simulated: boolean;
  verification: { status: string; reason: string | null; challengeId: string | null; provenAt: string | null; claims: { gpus: Array<{ uuid: string }> } | null };
  challenges: Array<{ id: string; cause: string; state: string; simulated: boolean; gpus: Array<{ uuid: string }>; rowsChecked: unknown[]; elapsedSeconds: number | null; reason: string | null }>;
}

const market = await Marketplace.start(t);
const agent = await enrollAgent(market, { name: 'agent', farm: FARM, payout: PAYOUT, gpus: '1x rtx-4090-24gb' });

/**
 * Polls until the farm offers `gpus` GPUs, checking at each poll that an offer of that size is
 * only ever listed for a verified machine whose challenge covered that many GPUs. Capacity is
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

t.test('default: a newly enrolled machine is offered once the real agent passed the GPU challenge the control plane put to it', async (t) => {
  t.same((await market.adminGet<MachineRecord>(`/machines/${agent.machineId}`)).verification.status, 'unverified', 'enrolled, not verified');
  agent.start();
  const machine = await offeredOnlyOnceVerified(1);
  t.match(machine, { status: 'online', simulated: true, verification: { status: 'verified', reason: null, provenAt: null } });
  const [challenge] = machine.challenges;
  t.match(challenge, { id: machine.verification.challengeId, cause: 'enrollment', state: 'passed', simulated: true, reason: null, gpus: [{ uuid: 'GPU-sim-rtx-4090-24gb-0' }] });
  t.equal(challenge?.rowsChecked.length, 16, 'the server checked 16 rows of the agent\'s chain');
  t.ok((challenge?.elapsedSeconds ?? -1) >= 0);
});

t.test('behavior: after its GPU set changed the machine is offered again only once a new challenge passed', async (t) => {
  const before = await market.adminGet<MachineRecord>(`/machines/${agent.machineId}`);
  await agent.current!.stop();
  agent.start({ GF_AGENT_SIMULATE_GPUS: '2x rtx-4090-24gb' });
  const machine = await offeredOnlyOnceVerified(2);
  t.not(machine.verification.challengeId, before.verification.challengeId, 'a new challenge');
  t.same(machine.verification.claims?.gpus.map((g) => g.uuid), ['GPU-sim-rtx-4090-24gb-0', 'GPU-sim-rtx-4090-24gb-1']);
  t.match(machine.challenges[0], { cause: 'claims_changed', state: 'passed', gpus: [{ uuid: 'GPU-sim-rtx-4090-24gb-0' }, { uuid: 'GPU-sim-rtx-4090-24gb-1' }] });
});

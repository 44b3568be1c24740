import type { Job } from '@gpufarm/shared';
import t from 'tap';
import { describeJob } from '../src/cli/jobview.js';

const hex = (c: string, n: number) => `0x${c.repeat(n)}`;
const WALLET = hex('a', 40);

/** A released ETH job whose receipt is `receipt` (the rest as the API gives it). */
function jobWith(receipt: Partial<NonNullable<Job['receipt']>>): Job {
  return {
    object: 'job',
    id: 'job_1',
    status: 'COMPLETED',
    verificationLevel: 'HOST_REPORTED',
    pricing: { maxPricePerGpuHourMicroUsd: 1_000_000, minBillingSeconds: 60, platformFeeBps: 1000, estimateLowMicroUsd: 1, estimateHighMicroUsd: 2, maxCostMicroUsd: 2 },
    payment: { token: hex('0', 40), symbol: 'ETH', decimals: 18, maxPayment: '1000', escrowJobKey: hex('1', 64) },
    links: { dashboard: 'http://x.test/dashboard/jobs/job_1', logs: 'http://x.test/v1/jobs/job_1/logs', funding: 'http://x.test/v1/jobs/job_1/funding' },
    assignment: null,
    cost: null,
    result: null,
    receipt: {
      jobKey: hex('1', 64),
      status: 'released',
      amount: '600',
      computeSeconds: 60,
      resultHash: null,
      challengeEndsAt: null,
      transactions: { fund: null, completion: null, release: null, refund: null },
      disputeEndsAt: null,
      disputeOutcome: null,
      withdrawal: null,
      ...receipt,
    },
    artifacts: [],
    startup: null,
  };
}

t.test('behavior: gf shows a share waiting in the escrow with the call that takes it, and a dispute\'s deadline and timeout', async (t) => {
  const waiting = describeJob(jobWith({ withdrawal: { status: 'waiting_withdrawal', wallet: WALLET, amount: '400', withdrawTxHash: null, withdrawnAt: null } }));
  t.match(waiting, `withdraw  400 base units of ETH wait in the escrow: send withdraw(${hex('0', 40)}) from ${WALLET}`);
  const withdrawn = describeJob(jobWith({ withdrawal: { status: 'withdrawn', wallet: WALLET, amount: '400', withdrawTxHash: hex('2', 64), withdrawnAt: '2026-11-01T00:00:00.000Z' } }));
  t.notMatch(withdrawn, /withdraw /, 'nothing to do once withdrawn');
  t.match(describeJob(jobWith({ status: 'disputed', disputeEndsAt: '2026-11-15T00:00:00.000Z' })), 'dispute   unresolved by 2026-11-15T00:00:00.000Z, the whole deposit comes back');
  t.match(describeJob(jobWith({ disputeOutcome: 'timed_out' })), 'dispute   timed out: the whole deposit went back');
  t.notMatch(describeJob(jobWith({})), /dispute|withdraw /, 'a plain release says neither');
});

t.test('behavior: gf shows the start phases in one line, a skipped pull and a phase in progress as such', async (t) => {
  const phase = (status: 'done' | 'skipped' | 'in_progress' | 'pending', durationMs: number | null = null) => ({ status, startedAt: null, endedAt: null, durationMs });
  const text = describeJob({
    ...jobWith({}),
    startup: {
      assignmentId: 'asg_1',
      attempt: 1,
      phases: { queued: phase('done', 24), dispatch: phase('done', 291), pull: phase('skipped'), container: phase('done', 1250), firstLog: phase('in_progress'), run: phase('in_progress'), upload: phase('pending') },
    },
  });
  t.match(text, 'start     queued 24 ms · dispatch 291 ms · pull skipped · container 1.3 s · firstLog in progress · run in progress\n');
});

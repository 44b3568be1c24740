import t from 'tap';
import type { JobRow } from '../src/jobs/store.js';
import { buildJobTimeline } from '../src/jobs/timeline.js';
import type { JobTimelineRecords } from '../src/jobs/timeline-store.js';

/** The timeline's pure part on plain rows: which record makes which state, and the order. */

const at = (minute: number) => new Date(Date.UTC(2026, 10, 25, 12, minute));
const hash = (byte: string) => `0x${byte.repeat(32)}`;
const FUND = hash('f1');
const COMPLETION = hash('c1');
const RELEASE = hash('e1');
const DISPUTE = hash('d1');

function row(fields: Partial<JobRow>): JobRow {
  return {
    id: 'job_test',
    account_id: 'acc_test',
    title: 'a title',
    status: 'COMPLETED',
    created_at: at(0),
    updated_at: at(59),
    fund_tx_hash: FUND,
    escrow_address: `0x${'a'.repeat(40)}`,
    escrow_job_key: hash('11'),
    completion_tx_hash: COMPLETION,
    challenge_ends_at: at(30),
    settlement_status: 'released',
    release_tx_hash: RELEASE,
    dispute_tx_hash: null,
    disputed_at: null,
    refund_status: null,
    refund_authorize_tx_hash: null,
    refund_tx_hash: null,
    ...fields,
  } as JobRow;
}

function records(fields: Partial<JobTimelineRecords> = {}): JobTimelineRecords {
  return {
    statusChangedAt: at(11),
    creditedAt: at(1),
    assignments: [{ offered_at: at(2), started_at: at(3) }],
    billing: [
      { type: 'funded', tx_hash: FUND, created_at: at(1) },
      { type: 'charge', tx_hash: COMPLETION, created_at: at(10) },
      { type: 'release', tx_hash: RELEASE, created_at: at(31) },
    ],
    operatorTransactions: [],
    ...fields,
  };
}

const states = (job: JobRow, r: JobTimelineRecords) => buildJobTimeline(job, r).events.map((e) => e.state);

t.test('behavior: the release is told apart by whose transaction it is', async (t) => {
  const path = ['created', 'funded', 'queued', 'assigned', 'running', 'completion_recorded', 'completed'];
  t.same(states(row({}), records({ operatorTransactions: [{ action: 'release', tx_hash: RELEASE, state: 'mined', updated_at: at(31) }] })), [...path, 'challenge_window_ends', 'released'], "the operator's release after the window");
  t.same(states(row({}), records()), [...path, 'challenge_window_ends', 'released'], "another party's release after the window");
  const early = records({ billing: [...records().billing.slice(0, 2), { type: 'release', tx_hash: RELEASE, created_at: at(12) }] });
  t.same(states(row({}), early), [...path, 'approved'], "recorded inside the window: the customer's approve");
  t.same(states(row({ dispute_tx_hash: DISPUTE, disputed_at: at(13) }), records()), [...path, 'disputed', 'challenge_window_ends', 'resolved'], 'a disputed job is released only by a resolution');
  const timeline = buildJobTimeline(row({ dispute_tx_hash: DISPUTE, disputed_at: at(13) }), records());
  t.same(timeline.events.find((e) => e.state === 'disputed'), { state: 'disputed', at: at(13).toISOString(), txHash: DISPUTE });
  t.same(timeline.events.find((e) => e.state === 'resolved'), { state: 'resolved', at: at(31).toISOString(), txHash: RELEASE });
});

t.test('behavior: a late funding of a canceled job is never queued; its refund, authorized and claimed, with their transactions', async (t) => {
  const job = row({ status: 'CANCELED', completion_tx_hash: null, challenge_ends_at: null, settlement_status: null, release_tx_hash: null, refund_status: 'claimed', refund_authorize_tx_hash: hash('a1'), refund_tx_hash: hash('b1') });
  const timeline = buildJobTimeline(
    job,
    records({
      statusChangedAt: at(1),
      creditedAt: at(5),
      assignments: [],
      billing: [{ type: 'refund', tx_hash: hash('b1'), created_at: at(9) }],
      operatorTransactions: [{ action: 'authorizeRefund', tx_hash: hash('a1'), state: 'mined', updated_at: at(6) }],
    }),
  );
  t.same(
    timeline.events.map((e) => [e.state, e.at, e.txHash]),
    [
      ['created', at(0).toISOString(), null],
      ['canceled', at(1).toISOString(), null],
      ['funded', at(5).toISOString(), FUND],
      ['refund_authorized', at(6).toISOString(), hash('a1')],
      ['refunded', at(9).toISOString(), hash('b1')],
    ],
  );
});

t.test('args: an event without a recorded time stays after the one before it', async (t) => {
  const timeline = buildJobTimeline(row({}), records({ billing: [{ type: 'funded', tx_hash: FUND, created_at: at(1) }] }));
  const released = timeline.events.at(-1)!;
  t.same(released, { state: 'released', at: null, txHash: RELEASE });
  t.same(timeline.events.map((e) => e.state).slice(-4), ['completed', 'completion_recorded', 'challenge_window_ends', 'released'], 'each after the event built before it');
  t.equal(timeline.events.find((e) => e.state === 'completion_recorded')!.at, null, 'no charge entry: no time');
});

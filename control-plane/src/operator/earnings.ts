import { stringify } from 'csv-stringify/sync';
import type { Queryable } from '../db/database.js';
import { microUsdToTokenUnits } from '../jobs/settlement.js';
import { ledgerRows } from './store.js';

/**
 * A farm's earnings ledger, from what the control plane recorded of the escrow: each completed
 * job's payout and fee (the farm gets payout - fee), the challenge window's end, the release
 * and its transaction. A job is the farm's when the assignment that produced its result ran on
 * one of the farm's machines.
 *
 * States: `pending` (completed, in or past the challenge window, not released yet),
 * `disputed` (the customer disputed it; an admin resolves it), `released` (paid out: the amount
 * went to the payout address), `refunded` (released with nothing for the farm: a dispute
 * resolved as a refund), `waiting_withdrawal` (released, but the escrow could not send the payout:
 * it waits in the escrow until the payout wallet calls `withdraw(token)`; `released` once it did).
 */

export type EarningState = 'pending' | 'released' | 'disputed' | 'refunded' | 'waiting_withdrawal';
export type EarningsGroup = 'job' | 'machine' | 'day';

export interface JobEarning {
  jobId: string;
  machineId: string;
  token: string;
  symbol: string;
  decimals: number;
  /** Token base units the farm is paid: payout - fee. */
  amount: bigint;
  fee: bigint;
  state: EarningState;
  completedAt: Date;
  challengeEndsAt: Date | null;
  releasedAt: Date | null;
  releaseTxHash: string | null;
}

/** The farms' settled jobs completed in `[from, to)`, newest first. */
export async function jobEarnings(db: Queryable, params: { farmIds: readonly string[]; from: Date | null; to: Date | null }): Promise<JobEarning[]> {
  const rows = await ledgerRows(db, params);
  return rows.map((row) => {
    const payout = BigInt(row.payout ?? '0');
    // Completions recorded before the fee was kept: the fee is what the completion sent, recomputed.
    const recomputed = row.feeMicroUsd === null ? 0n : microUsdToTokenUnits({ payment_kind: row.paymentKind, payment_decimals: row.decimals, wei_per_usd: row.weiPerUsd }, Number(row.feeMicroUsd));
    // A dispute resolved as a refund leaves a payout of 0, and no fee is taken from nothing.
    const recorded = row.fee !== null ? BigInt(row.fee) : recomputed;
    const fee = recorded < payout ? recorded : payout;
    const amount = payout - fee;
    const state: EarningState =
      row.settlementStatus === 'completed' ? 'pending'
      : row.settlementStatus === 'disputed' ? 'disputed'
      : amount === 0n ? 'refunded'
      : row.waitingWithdrawal ? 'waiting_withdrawal'
      : 'released';
    return {
      jobId: row.jobId,
      machineId: row.machineId,
      token: row.token,
      symbol: row.symbol,
      decimals: row.decimals,
      amount,
      fee,
      state,
      completedAt: row.completedAt,
      challengeEndsAt: row.challengeEndsAt,
      releasedAt: row.releasedAt,
      releaseTxHash: row.releaseTxHash,
    };
  });
}

/** A ledger row as the API and the CSV give it: amounts as decimal strings of base units. */
export interface EarningRowView {
  jobId: string | null;
  machineId: string | null;
  day: string | null;
  token: string;
  symbol: string;
  decimals: number;
  amount: string;
  fee: string;
  state: EarningState;
  completedAt: string | null;
  challengeEndsAt: string | null;
  releasedAt: string | null;
  releaseTxHash: string | null;
}

function dayOf(at: Date): string {
  return at.toISOString().slice(0, 10);
}

/**
 * The ledger's rows: one per job, or summed per (machine | UTC day of completion, token, state).
 * Summed rows keep the latest completion and release times of the jobs in them.
 */
export function groupEarnings(jobs: readonly JobEarning[], groupBy: EarningsGroup): EarningRowView[] {
  if (groupBy === 'job') {
    return jobs.map((e) => ({
      jobId: e.jobId,
      machineId: e.machineId,
      day: dayOf(e.completedAt),
      token: e.token,
      symbol: e.symbol,
      decimals: e.decimals,
      amount: e.amount.toString(),
      fee: e.fee.toString(),
      state: e.state,
      completedAt: e.completedAt.toISOString(),
      challengeEndsAt: e.challengeEndsAt?.toISOString() ?? null,
      releasedAt: e.releasedAt?.toISOString() ?? null,
      releaseTxHash: e.releaseTxHash,
    }));
  }
  const groups = new Map<string, { view: EarningRowView; amount: bigint; fee: bigint }>();
  for (const e of jobs) {
    const by = groupBy === 'machine' ? e.machineId : dayOf(e.completedAt);
    const key = `${by}|${e.token}|${e.state}`;
    let group = groups.get(key);
    if (!group) {
      group = {
        view: { jobId: null, machineId: groupBy === 'machine' ? e.machineId : null, day: groupBy === 'day' ? by : null, token: e.token, symbol: e.symbol, decimals: e.decimals, amount: '0', fee: '0', state: e.state, completedAt: null, challengeEndsAt: null, releasedAt: null, releaseTxHash: null },
        amount: 0n,
        fee: 0n,
      };
      groups.set(key, group);
    }
    group.amount += e.amount;
    group.fee += e.fee;
    const latest = (a: string | null, b: Date | null) => (b !== null && (a === null || b.toISOString() > a) ? b.toISOString() : a);
    group.view.completedAt = latest(group.view.completedAt, e.completedAt);
    group.view.releasedAt = latest(group.view.releasedAt, e.releasedAt);
  }
  return [...groups.values()].map((g) => ({ ...g.view, amount: g.amount.toString(), fee: g.fee.toString() }));
}

/**
 * Per token: what waits in (or past) the challenge window, what was released to the payout
 * address, and what was released but waits in the escrow for the payout wallet's withdrawal.
 */
export function earningTotals(jobs: readonly JobEarning[]): Array<{ token: string; symbol: string; decimals: number; pending: string; released: string; waitingWithdrawal: string }> {
  const totals = new Map<string, { token: string; symbol: string; decimals: number; pending: bigint; released: bigint; waitingWithdrawal: bigint }>();
  for (const e of jobs) {
    const total = totals.get(e.token) ?? { token: e.token, symbol: e.symbol, decimals: e.decimals, pending: 0n, released: 0n, waitingWithdrawal: 0n };
    if (e.state === 'pending') total.pending += e.amount;
    if (e.state === 'released') total.released += e.amount;
    if (e.state === 'waiting_withdrawal') total.waitingWithdrawal += e.amount;
    totals.set(e.token, total);
  }
  return [...totals.values()]
    .sort((a, b) => a.symbol.localeCompare(b.symbol))
    .map((t) => ({ ...t, pending: t.pending.toString(), released: t.released.toString(), waitingWithdrawal: t.waitingWithdrawal.toString() }));
}

export const EARNINGS_CSV_COLUMNS = ['jobId', 'machineId', 'day', 'token', 'symbol', 'decimals', 'amount', 'fee', 'state', 'completedAt', 'challengeEndsAt', 'releasedAt', 'releaseTxHash'] as const;

/** The rows as RFC 4180 CSV: a header line, CRLF line ends, fields quoted where needed. */
export function earningsCsv(rows: readonly EarningRowView[]): string {
  return stringify(
    rows.map((row) => EARNINGS_CSV_COLUMNS.map((column) => row[column] ?? '')),
    { header: true, columns: [...EARNINGS_CSV_COLUMNS], record_delimiter: 'windows' },
  );
}

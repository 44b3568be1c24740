import { stringify } from 'csv-stringify/sync';
import { z } from 'zod';
import type { Queryable } from '../db/database.js';
import { decodeCursor, encodeCursor } from '../http/cursor.js';
import { ledgerGroups, ledgerJobs, type LedgerJobRow, type LedgerScope, type LedgerState } from './store.js';

/**
 * A farm's earnings ledger, from what the control plane recorded of the escrow: each completed
 * job's payout and fee (the farm gets payout - fee), the challenge window's end, the release
 * and its transaction. A job is the farm's when the assignment that produced its result ran on
 * one of the farm's machines. The rows, sums and totals are computed by the database
 * (`operator/store.ts`, which also defines the states), a page at a time: a farm with years of
 * jobs costs a request one page, never the whole ledger in memory.
 *
 * States: `pending` (completed, in or past the challenge window, not released yet),
 * `disputed` (the customer disputed it; an admin resolves it), `released` (paid out: the amount
 * went to the payout address), `refunded` (released with nothing for the farm: a dispute
 * resolved as a refund), `waiting_withdrawal` (released, but the escrow could not send the payout:
 * it waits in the escrow until the payout wallet calls `withdraw(token)`; `released` once it did).
 */

export type EarningState = LedgerState;
export type EarningsGroup = 'job' | 'machine' | 'day';
export type { LedgerScope };

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

export interface EarningsPage {
  data: EarningRowView[];
  /** Pass as `cursor` for the next page; null on the last. */
  nextCursor: string | null;
}

const jobCursor = z.strictObject({ at: z.string().regex(/^\d{1,12}(\.\d{1,6})?$/), id: z.string().min(1).max(100) });
const groupCursor = z.strictObject({ key: z.string().min(1).max(100), token: z.string().min(1).max(100), state: z.string().min(1).max(20) });

function dayOf(at: Date): string {
  return at.toISOString().slice(0, 10);
}

/** A job's row of the ledger as the earnings page and the operator's job page show it. */
export function earningOfJob(e: LedgerJobRow) {
  return {
    jobId: e.jobId,
    machineId: e.machineId,
    day: dayOf(e.completedAt),
    token: e.token,
    symbol: e.symbol,
    decimals: e.decimals,
    amount: e.amount,
    fee: e.fee,
    state: e.state,
    completedAt: e.completedAt.toISOString(),
    challengeEndsAt: e.challengeEndsAt?.toISOString() ?? null,
    releasedAt: e.releasedAt?.toISOString() ?? null,
    releaseTxHash: e.releaseTxHash,
  };
}

/**
 * One page of the ledger: one row per job (newest first), or summed per (machine | UTC day of
 * completion, token, state), each sum with the latest completion and release of its jobs.
 * `cursor` is the previous page's `nextCursor` (400 `invalid_request` naming `cursor` when it is
 * not one this grouping issued).
 */
export async function earningsPage(db: Queryable, scope: LedgerScope, params: { groupBy: EarningsGroup; cursor: string | undefined; limit: number }): Promise<EarningsPage> {
  const { groupBy, limit } = params;
  if (groupBy === 'job') {
    const after = params.cursor === undefined ? null : decodeCursor(params.cursor, jobCursor);
    const rows = await ledgerJobs(db, scope, { after, limit: limit + 1 });
    const page = rows.slice(0, limit);
    return {
      data: page.map(earningOfJob),
      nextCursor: rows.length > limit ? encodeCursor(page.at(-1)!.cursor) : null,
    };
  }
  const after = params.cursor === undefined ? null : decodeCursor(params.cursor, groupCursor);
  const rows = await ledgerGroups(db, scope, { groupBy, after, limit: limit + 1 });
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    data: page.map((g) => ({
      jobId: null,
      machineId: groupBy === 'machine' ? g.key : null,
      day: groupBy === 'day' ? g.key : null,
      token: g.token,
      symbol: g.symbol,
      decimals: g.decimals,
      amount: g.amount,
      fee: g.fee,
      state: g.state,
      completedAt: g.completedAt.toISOString(),
      challengeEndsAt: null,
      releasedAt: g.releasedAt?.toISOString() ?? null,
      releaseTxHash: null,
    })),
    nextCursor: rows.length > limit && last ? encodeCursor({ key: last.key, token: last.token, state: last.state }) : null,
  };
}

export const EARNINGS_CSV_COLUMNS = ['jobId', 'machineId', 'day', 'token', 'symbol', 'decimals', 'amount', 'fee', 'state', 'completedAt', 'challengeEndsAt', 'releasedAt', 'releaseTxHash'] as const;

/** Rows read per query while the CSV streams. */
export const EARNINGS_CSV_PAGE = 1000;

/**
 * The ledger as RFC 4180 CSV (a header line, CRLF line ends, fields quoted where needed), in
 * chunks of `EARNINGS_CSV_PAGE` rows read one page at a time: the whole ledger is never held.
 */
export async function* earningsCsv(db: Queryable, scope: LedgerScope, groupBy: EarningsGroup): AsyncGenerator<string> {
  yield stringify([[...EARNINGS_CSV_COLUMNS]], { record_delimiter: 'windows' });
  let cursor: string | undefined;
  do {
    const page = await earningsPage(db, scope, { groupBy, cursor, limit: EARNINGS_CSV_PAGE });
    if (page.data.length > 0) yield stringify(page.data.map((row) => EARNINGS_CSV_COLUMNS.map((column) => row[column] ?? '')), { record_delimiter: 'windows' });
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined);
}

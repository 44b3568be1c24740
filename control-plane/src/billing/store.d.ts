import type { Queryable } from '../db/database.js';
export interface BillingEntryRow {
    id: string;
    type: string;
    job_id: string | null;
    amount_micro_usd: number;
    token: string | null;
    amount: string | null;
    tx_hash: string | null;
    created_at: Date;
}
/** One page of an account's billing entries, newest first (ids are time-ordered), after id `afterId`. */
export declare function listBillingEntries(db: Queryable, params: {
    accountId: string;
    limit: number;
    afterId: string | null;
}): Promise<BillingEntryRow[]>;
/** Records a billing entry (funding, charge, refund, release); the escrow issue writes these. */
export declare function insertBillingEntry(db: Queryable, entry: {
    accountId: string;
    type: string;
    jobId?: string | null;
    amountMicroUsd: number;
    token?: string | null;
    amount?: string | null;
    txHash?: string | null;
}): Promise<string>;

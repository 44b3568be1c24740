import { BaseError, ContractFunctionRevertedError, decodeErrorResult, encodeFunctionData, erc20Abi, ExecutionRevertedError, parseEventLogs, type Address, type Hash, type Hex, type Log, type TransactionReceipt } from 'viem';
import { errorText, gpuFarmEscrowAbi } from '@gpufarm/shared';
import type { Database } from '../db/database.js';
import type { EscrowChain } from './client.js';
import { ChainError } from './errors.js';
import type { OperatorAction } from './operator-store.js';
import { sendOperatorTxOnce } from './operator-sender.js';

export { ChainError, type ChainErrorCode } from './errors.js';

/** The escrow's job states, in the contract's enum order. */
export const ESCROW_STATUSES = ['none', 'funded', 'completed', 'disputed', 'refund_authorized', 'released', 'refunded'] as const;
export type EscrowStatus = (typeof ESCROW_STATUSES)[number];

function operatorOf(chain: EscrowChain) {
  if (!chain.operator) throw new ChainError('operator_key_missing', 'no operator key is configured: set GF_OPERATOR_PRIVATE_KEY');
  return chain.operator;
}

/** The contract refused the call: viem found a revert somewhere in the error's causes. */
const isRevert = (err: unknown) =>
  err instanceof BaseError && err.walk((e) => e instanceof ContractFunctionRevertedError || e instanceof ExecutionRevertedError) !== null;

/** One operator call on the escrow: the job it acts on, the function, its calldata. */
interface OperatorCall {
  jobKey: Hex;
  action: OperatorAction;
  data: Hex;
}

/** The escrow's error name in a revert's data (`NotCompleted`, …), when the node passed the data on. */
function revertName(err: BaseError): string | null {
  const carrier = err.walk((e) => typeof (e as { data?: unknown }).data === 'string' && /^0x[0-9a-f]{8}/i.test((e as { data: string }).data));
  if (!carrier) return null;
  try {
    return decodeErrorResult({ abi: gpuFarmEscrowAbi, data: (carrier as unknown as { data: Hex }).data }).errorName;
  } catch {
    return null;
  }
}

function chainFailure(label: string, err: unknown): ChainError {
  const reverted = isRevert(err);
  const name = reverted && err instanceof BaseError ? revertName(err) : null;
  const message = name ? `the escrow refused it (${name})` : errorText(err).split('\n')[0];
  return new ChainError(reverted ? 'chain_reverted' : 'chain_unavailable', `${label} failed: ${message}`, { cause: err });
}

/**
 * Sends one operator transaction to the escrow and waits for its receipt; a revert throws a
 * ChainError. With `ledger` (the control plane always passes its database) the call goes
 * through `sendOperatorTxOnce`: sent at most once per job action across replicas and crashes,
 * one sender of the key at a time. Without it (contract tests, tools) it is sent as it is.
 */
async function sendOperatorTx(chain: EscrowChain, call: OperatorCall, ledger?: Database): Promise<TransactionReceipt> {
  const operator = operatorOf(chain);
  const label = call.action;
  let receipt: TransactionReceipt;
  if (ledger) {
    try {
      receipt = await sendOperatorTxOnce(chain, ledger, call, operator.account.address, async (nonce) => {
        const request = await operator.prepareTransactionRequest({ to: chain.escrowAddress, data: call.data, nonce });
        return operator.signTransaction(request);
      });
    } catch (err) {
      if (err instanceof ChainError || !(err instanceof BaseError)) throw err;
      throw chainFailure(label, err);
    }
  } else {
    let hash: Hash;
    try {
      hash = await operator.sendTransaction({ to: chain.escrowAddress, data: call.data });
    } catch (err) {
      throw chainFailure(label, err);
    }
    try {
      receipt = await chain.publicClient.waitForTransactionReceipt({ hash, timeout: 30_000 });
    } catch (err) {
      throw new ChainError('chain_unavailable', `${label}: no receipt for ${hash}; the next pass looks again`, { cause: err });
    }
  }
  if (receipt.status !== 'success') throw new ChainError('chain_reverted', `${label} reverted in transaction ${receipt.transactionHash}`);
  return receipt;
}

export interface EscrowJob {
  status: EscrowStatus;
  customer: Address;
  token: Address;
  amount: bigint;
  jobHash: Hex;
  provider: Address;
  payout: bigint;
  fee: bigint;
  computeSeconds: bigint;
  challengeEndsAt: bigint;
  /** Unix seconds until which the operator may resolve a dispute (0 before one). */
  disputeEndsAt: bigint;
  resultHash: Hex;
}

/** The escrow's record of `jobKey` (status `none` when it was never funded). */
export async function readEscrowJob(chain: EscrowChain, jobKey: Hex): Promise<EscrowJob> {
  const job = await chain.publicClient.readContract({ address: chain.escrowAddress, abi: gpuFarmEscrowAbi, functionName: 'getJob', args: [jobKey] });
  return { ...job, status: ESCROW_STATUSES[job.status] ?? 'none' };
}

/** The ERC-20 allowance `owner` gave the escrow. */
export async function readAllowance(chain: EscrowChain, token: Address, owner: Address): Promise<bigint> {
  return chain.publicClient.readContract({ address: token, abi: erc20Abi, functionName: 'allowance', args: [owner, chain.escrowAddress] });
}

/** Operator: lets the customer claim the whole deposit back (after a cancel or a failure). */
export async function authorizeRefund(chain: EscrowChain, jobKey: Hex, ledger?: Database): Promise<{ txHash: Hash }> {
  const data = encodeFunctionData({ abi: gpuFarmEscrowAbi, functionName: 'authorizeRefund', args: [jobKey] });
  const receipt = await sendOperatorTx(chain, { jobKey, action: 'authorizeRefund', data }, ledger);
  return { txHash: receipt.transactionHash };
}

export interface Completion {
  jobKey: Hex;
  /** The final payment in token base units, fee included; never above the deposit. */
  payout: bigint;
  /** The platform fee inside `payout`, paid to the treasury at release. */
  fee: bigint;
  computeSeconds: number;
  /** bytes32: `0x` + the output's sha256. */
  resultHash: Hex;
  /** The farm's payout address. */
  provider: Address;
}

/** What the escrow recorded for a completion (its JobCompleted event). */
export interface CompletionRecorded {
  txHash: Hash;
  challengeEndsAt: Date;
  payout: bigint;
  fee: bigint;
  computeSeconds: number;
  resultHash: Hex;
}

/**
 * Operator: records a finished job's final payment on the escrow and opens the challenge window.
 * Returns the transaction and what the escrow recorded (from the JobCompleted event): with a
 * ledger a repeated call answers the first call's completion, whatever this one asked.
 */
export async function completeJob(chain: EscrowChain, completion: Completion, ledger?: Database): Promise<CompletionRecorded> {
  const data = encodeFunctionData({
    abi: gpuFarmEscrowAbi,
    functionName: 'completeJob',
    args: [completion.jobKey, completion.payout, completion.fee, BigInt(completion.computeSeconds), completion.resultHash, completion.provider],
  });
  const receipt = await sendOperatorTx(chain, { jobKey: completion.jobKey, action: 'completeJob', data }, ledger);
  const [event] = parseEventLogs({ abi: gpuFarmEscrowAbi, eventName: 'JobCompleted', logs: receipt.logs.filter((l) => sameAddress(l.address, chain.escrowAddress)) });
  if (!event) throw new ChainError('unexpected_receipt', `completeJob transaction ${receipt.transactionHash} emitted no JobCompleted; check GF_ESCROW_ADDRESS names the escrow contract`);
  const { args } = event;
  return {
    txHash: receipt.transactionHash,
    challengeEndsAt: new Date(Number(args.challengeEndsAt) * 1000),
    payout: args.payout,
    fee: args.fee,
    computeSeconds: Number(args.computeSeconds),
    resultHash: args.resultHash,
  };
}

/** A payout the escrow could not send at a release (its PaymentDeferred log): it waits in `withdrawable(to, token)`. */
export interface DeferredPaymentLog {
  jobKey: Hex;
  to: Address;
  token: Address;
  amount: bigint;
  txHash: Hash;
  logIndex: number;
  blockNumber: bigint;
}

/** What a transaction that paid a job out did: its hash and the payouts the escrow deferred. */
export interface Payout {
  txHash: Hash;
  deferred: DeferredPaymentLog[];
}

/** The escrow's PaymentDeferred logs in a receipt (logs of other contracts are ignored). */
export function deferredPaymentsIn(chain: Pick<EscrowChain, 'escrowAddress'>, receipt: Pick<TransactionReceipt, 'logs'>): DeferredPaymentLog[] {
  const logs = receipt.logs.filter((l) => sameAddress(l.address, chain.escrowAddress));
  return parseEventLogs({ abi: gpuFarmEscrowAbi, eventName: 'PaymentDeferred', logs }).map((l) => ({
    ...l.args,
    txHash: l.transactionHash,
    logIndex: l.logIndex,
    blockNumber: l.blockNumber,
  }));
}

async function payOut(chain: EscrowChain, call: OperatorCall, ledger?: Database): Promise<Payout> {
  const receipt = await sendOperatorTx(chain, call, ledger);
  return { txHash: receipt.transactionHash, deferred: deferredPaymentsIn(chain, receipt) };
}

/** Anyone (the operator here): pays out a completed job after its challenge window. */
export function releaseJob(chain: EscrowChain, jobKey: Hex, ledger?: Database): Promise<Payout> {
  const data = encodeFunctionData({ abi: gpuFarmEscrowAbi, functionName: 'release', args: [jobKey] });
  return payOut(chain, { jobKey, action: 'release', data }, ledger);
}

/** Operator: settles a dispute before its deadline with a new payment (at most the recorded one) and pays out. */
export function resolveDispute(chain: EscrowChain, params: { jobKey: Hex; payout: bigint; fee: bigint }, ledger?: Database): Promise<Payout> {
  const data = encodeFunctionData({ abi: gpuFarmEscrowAbi, functionName: 'resolveDispute', args: [params.jobKey, params.payout, params.fee] });
  return payOut(chain, { jobKey: params.jobKey, action: 'resolveDispute', data }, ledger);
}

/** Anyone (the operator here): ends a dispute left unresolved past its deadline; the whole deposit goes back to the customer. */
export function claimDisputeTimeout(chain: EscrowChain, jobKey: Hex, ledger?: Database): Promise<Payout> {
  const data = encodeFunctionData({ abi: gpuFarmEscrowAbi, functionName: 'claimDisputeTimeout', args: [jobKey] });
  return payOut(chain, { jobKey, action: 'claimDisputeTimeout', data }, ledger);
}

export const sameAddress = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

/** The escrow's events among `logs` (any address), decoded; logs that are not escrow events are skipped. */
export function decodeEscrowLogs(logs: readonly Log[]) {
  return parseEventLogs({ abi: gpuFarmEscrowAbi, logs: logs as Log[], strict: true });
}

import type { FundingCall } from '@gpufarm/shared';
import { toFunctionSelector, type Address, type Hex } from 'viem';
import { hexWord, uintWord } from './abi-words.js';

const CREATE_JOB = toFunctionSelector('createJob(bytes32,address,uint256,bytes32)');
const APPROVE = toFunctionSelector('approve(address,uint256)');

export const ZERO_ADDRESS = '0x0000000000000000000000000000000000000000' as const;

/**
 * The calls a customer's wallet sends to fund a job, in order (pure): for a token, `approve`
 * (left out when `includeApprove` is false: the allowance already covers it) then `createJob`;
 * for ETH (zero token address) one `createJob` carrying the amount as `value`.
 */
export function fundingCalls(params: { escrow: Address; token: Address; symbol: string; maxPayment: bigint; escrowJobId: Hex; jobHash: Hex; includeApprove: boolean }): FundingCall[] {
  const eth = params.token.toLowerCase() === ZERO_ADDRESS;
  const createJob: FundingCall = {
    title: `Fund the job's escrow with ${params.maxPayment} base units of ${params.symbol}`,
    to: params.escrow,
    data: `${CREATE_JOB}${hexWord(params.escrowJobId)}${hexWord(params.token)}${uintWord(params.maxPayment)}${hexWord(params.jobHash)}`,
    value: eth ? params.maxPayment.toString() : '0',
  };
  if (eth || !params.includeApprove) return [createJob];
  return [
    {
      title: `Allow the escrow to take ${params.maxPayment} base units of ${params.symbol}`,
      to: params.token,
      data: `${APPROVE}${hexWord(params.escrow)}${uintWord(params.maxPayment)}`,
      value: '0',
    },
    createJob,
  ];
}

import type { FundingCall } from '@gpufarm/shared';
import { encodeFunctionData, erc20Abi, type Address, type Hex } from 'viem';
import { gpuFarmEscrowAbi } from './artifacts.generated.js';

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
    data: encodeFunctionData({ abi: gpuFarmEscrowAbi, functionName: 'createJob', args: [params.escrowJobId, params.token, params.maxPayment, params.jobHash] }),
    value: eth ? params.maxPayment.toString() : '0',
  };
  if (eth || !params.includeApprove) return [createJob];
  return [
    {
      title: `Allow the escrow to take ${params.maxPayment} base units of ${params.symbol}`,
      to: params.token,
      data: encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [params.escrow, params.maxPayment] }),
      value: '0',
    },
    createJob,
  ];
}

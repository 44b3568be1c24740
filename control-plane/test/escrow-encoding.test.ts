import t from 'tap';
import { encodeAbiParameters, encodeFunctionData, erc20Abi, keccak256, maxUint256 } from 'viem';
import { gpuFarmEscrowAbi } from '@gpufarm/shared';
import { fundingCalls } from '../src/chain/funding-calls.js';
import { jobHash } from '../src/chain/job-hash.js';
import { Secret, loadConfig } from '../src/config.js';
import { inspect } from 'node:util';

const escrow = '0x5fbdb2315678afecb367f032d93f642f64180aa3' as const;
const token = '0xe7f1725e7734ce288f8367e1bb143e90bb3f0512' as const;
const escrowJobId = `0x${'12'.repeat(32)}` as const;

t.test('behavior: the hand-written encodings equal viem’s', async (t) => {
  for (const maxPayment of [1n, 733_333_333_333_333n, maxUint256]) {
    const terms = { escrowJobId, specHashHex: 'ab'.repeat(32), token, maxPayment, chainId: 4663, escrow };
    t.equal(
      jobHash(terms),
      keccak256(encodeAbiParameters([{ type: 'bytes32' }, { type: 'bytes32' }, { type: 'address' }, { type: 'uint256' }, { type: 'uint256' }, { type: 'address' }], [escrowJobId, `0x${'ab'.repeat(32)}`, token, maxPayment, 4663n, escrow])),
      `job hash for ${maxPayment}`,
    );
    const hash = jobHash(terms);
    const [approve, create] = fundingCalls({ escrow, token, symbol: 'tUSDC', maxPayment, escrowJobId, jobHash: hash, includeApprove: true });
    t.equal(approve!.data, encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [escrow, maxPayment] }));
    t.equal(create!.data, encodeFunctionData({ abi: gpuFarmEscrowAbi, functionName: 'createJob', args: [escrowJobId, token, maxPayment, hash] }));
  }
  t.throws(() => jobHash({ escrowJobId, specHashHex: 'ab'.repeat(32), token, maxPayment: maxUint256 + 1n, chainId: 1, escrow }), RangeError);
});

t.test('behavior: the operator key never prints', async (t) => {
  const key = `0x${'7f'.repeat(32)}`;
  const config = loadConfig({ GF_RPC_URL: 'http://127.0.0.1:8545', GF_ESCROW_ADDRESS: escrow, GF_OPERATOR_PRIVATE_KEY: key });
  t.ok(config.chain?.operatorKey instanceof Secret);
  t.equal(config.chain?.operatorKey?.reveal(), key);
  for (const text of [JSON.stringify(config, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)), inspect(config, { depth: 10 }), String(config.chain?.operatorKey)]) t.notMatch(text, /7f7f7f/);
  let message = '';
  try {
    loadConfig({ GF_OPERATOR_PRIVATE_KEY: `${key}zz` });
  } catch (err) {
    message = (err as Error).message;
  }
  t.match(message, /GF_OPERATOR_PRIVATE_KEY.*\[redacted\]/, 'a malformed key is named, its value is not shown');
  t.notMatch(message, /7f7f/);
  t.equal(loadConfig({ GF_RPC_URL: 'http://127.0.0.1:8545' }).chain, null, 'no escrow address: no funding');
});

t.test('args: GF_CHAIN_FILE fills the chain variables from a deployment file; set variables win', async (t) => {
  const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
  const { join } = await import('node:path');
  const { tmpdir } = await import('node:os');
  const dir = mkdtempSync(join(tmpdir(), 'gf-chain-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'chain.json');
  writeFileSync(file, JSON.stringify({ rpcUrl: 'http://127.0.0.1:8545', chainId: 4663, escrow, stablecoin: { address: token, symbol: 'tUSDC', decimals: 6 }, deployBlock: 3, operator: escrow }));
  const config = loadConfig({ GF_CHAIN_FILE: file, GF_STABLE_TOKEN_SYMBOL: 'USDC' });
  t.equal(config.chain?.rpcUrl, 'http://127.0.0.1:8545');
  t.equal(config.chain?.escrowAddress, escrow);
  t.equal(config.chain?.startBlock, 3);
  t.same(config.stableToken, { address: token, symbol: 'USDC', decimals: 6 }, 'a set variable wins');
  writeFileSync(file, '{"rpcUrl": 1}');
  t.throws(() => loadConfig({ GF_CHAIN_FILE: file }), { name: 'ConfigError', message: /GF_CHAIN_FILE: .*chain\.json is not a deployment file/ }, 'a malformed file is a ConfigError naming the variable');
  t.throws(() => loadConfig({ GF_CHAIN_FILE: join(dir, 'missing.json') }), { message: /GF_CHAIN_FILE: .*missing\.json is not a deployment file/ }, 'so is a missing one');
  t.equal(loadConfig({ GF_CHAIN_FILE: '' }).chain, null, 'empty: unset');
});

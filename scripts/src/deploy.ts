import { mkdirSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { addressOfKey, deployContracts } from '@gpufarm/control-plane/chain';
import { errorText } from '@gpufarm/shared';
import { scriptsEnv } from './env.js';

const USAGE = `npm run deploy -- --rpc-url URL --chain-id ID [--treasury ADDRESS] [--operator ADDRESS] [--challenge-window SECONDS] [--stablecoin] [--out FILE]

Deploys the escrow (and with --stablecoin the test stablecoin, for test networks only) from the key
in GF_DEPLOYER_PRIVATE_KEY and prints the addresses. The operator defaults to the deployer.
Then configure the control plane with GF_RPC_URL, GF_ESCROW_ADDRESS and GF_OPERATOR_PRIVATE_KEY.`;

/** `npm run deploy`: the escrow on any EVM chain. `npm start` deploys to its local anvil by itself. */
async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'rpc-url': { type: 'string' },
      'chain-id': { type: 'string' },
      treasury: { type: 'string' },
      operator: { type: 'string' },
      'challenge-window': { type: 'string', default: '86400' },
      stablecoin: { type: 'boolean', default: false },
      out: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  const key = scriptsEnv().GF_DEPLOYER_PRIVATE_KEY;
  if (values.help || !values['rpc-url'] || !values['chain-id'] || !key) {
    console.error(USAGE);
    process.exit(values.help ? 0 : 2);
  }
  if (!/^0x[0-9a-fA-F]{64}$/.test(key)) throw new Error('GF_DEPLOYER_PRIVATE_KEY must be 0x followed by 64 hex digits');
  const deployer = addressOfKey(key as `0x${string}`);
  const address = (value: string | undefined, name: string): `0x${string}` => {
    if (value === undefined) return deployer;
    if (!/^0x[0-9a-fA-F]{40}$/.test(value)) throw new Error(`--${name} must be a 0x-prefixed 20-byte address`);
    return value as `0x${string}`;
  };
  const deployment = await deployContracts({
    rpcUrl: values['rpc-url'],
    chainId: Number(values['chain-id']),
    deployerKey: key as `0x${string}`,
    operator: address(values.operator, 'operator'),
    treasury: address(values.treasury, 'treasury'),
    challengeWindowSeconds: Number(values['challenge-window']),
    withStablecoin: values.stablecoin,
  });
  const text = `${JSON.stringify({ ...deployment, rpcUrl: values['rpc-url'] }, null, 2)}\n`;
  if (values.out) {
    mkdirSync(new URL('.', `file://${values.out}`).pathname, { recursive: true });
    writeFileSync(values.out, text);
  }
  console.log(text.trimEnd());
  console.log(`\nGF_RPC_URL=${values['rpc-url']} GF_ESCROW_ADDRESS=${deployment.escrow} GF_ESCROW_START_BLOCK=${deployment.deployBlock}`);
}

main().catch((err: unknown) => {
  console.error(`npm run deploy failed: ${errorText(err)}`);
  process.exit(1);
});

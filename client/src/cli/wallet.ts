import { readFile, stat } from 'node:fs/promises';
import type { WalletClient, Account, Chain, Transport } from 'viem';
import { z } from 'zod';
import { clientEnv } from './context.js';
import { WalletError } from './exit.js';

const privateKeySchema = z
  .string()
  .trim()
  .transform((k) => (k.startsWith('0x') ? k : `0x${k}`))
  .pipe(z.string().regex(/^0x[0-9a-fA-F]{64}$/));

/**
 * The wallet's private key: from `keyFile` (which must not be readable by group or others), else
 * GF_WALLET_KEY. The key never appears in an error or any output.
 */
export async function loadWalletKey(keyFile: string | undefined, env: NodeJS.ProcessEnv = process.env): Promise<`0x${string}`> {
  let text: string;
  let from: string;
  const walletKey = keyFile === undefined ? clientEnv(env).GF_WALLET_KEY : undefined;
  if (keyFile !== undefined) {
    from = keyFile;
    let mode: number;
    try {
      mode = (await stat(keyFile)).mode;
    } catch (err) {
      throw new WalletError(`Cannot read the wallet key file ${keyFile}: ${(err as NodeJS.ErrnoException).code ?? String(err)}.`, 'Check the path given to --wallet-key-file.');
    }
    if ((mode & 0o077) !== 0) {
      throw new WalletError(`The wallet key file ${keyFile} is readable by others (mode ${(mode & 0o777).toString(8).padStart(4, '0')}); refusing to use it.`, `Run: chmod 600 ${keyFile}`);
    }
    text = await readFile(keyFile, 'utf8');
  } else if (walletKey) {
    from = 'GF_WALLET_KEY';
    text = walletKey;
  } else {
    throw new WalletError('No wallet key: funding needs the private key of the account that owns the API key.', 'Set GF_WALLET_KEY, or pass --wallet-key-file FILE (mode 0600).');
  }
  const parsed = privateKeySchema.safeParse(text);
  if (!parsed.success) throw new WalletError(`${from} does not hold a private key (0x and 64 hex digits).`, 'Put only the key in it, as 0x followed by 64 hex digits.');
  return parsed.data as `0x${string}`;
}

const rpcUrlSchema = z.url({ protocol: /^https?$/ });

/**
 * A viem wallet client for `key` on the deployment's chain through `rpcUrl`. The chain id is the
 * deployment's; whether the RPC really serves that chain is checked before anything is sent.
 */
export async function openWallet(key: `0x${string}`, chainId: number, rpcUrl: string | undefined): Promise<WalletClient<Transport, Chain, Account>> {
  if (!rpcUrl) throw new WalletError('No chain RPC URL to send the funding transactions through.', 'Pass --rpc-url URL, set GF_RPC_URL, or store it with gf login --rpc-url URL.');
  if (!rpcUrlSchema.safeParse(rpcUrl).success) throw new WalletError(`The RPC URL ${rpcUrl} is not an http(s) URL.`, 'Pass --rpc-url http://host:port.');
  const [{ createWalletClient, defineChain, http }, { privateKeyToAccount }] = await Promise.all([import('viem'), import('viem/accounts')]);
  const chain = defineChain({ id: chainId, name: `gpufarm chain ${chainId}`, nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 }, rpcUrls: { default: { http: [rpcUrl] } } });
  return createWalletClient({ chain, transport: http(rpcUrl, { retryCount: 1 }), account: privateKeyToAccount(key) });
}

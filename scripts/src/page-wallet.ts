import type { BrowserContext } from 'playwright-core';
import { createWalletClient, http, numberToHex, type Hex, type WalletClient, type Transport, type Chain, type Account } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { z } from 'zod';
import { errorText } from '@gpufarm/shared';

/**
 * The browser wallet of the page tests and the dashboard bench: an EIP-1193 provider injected
 * into every page of a browser context (as `window.ethereum` and announced through EIP-6963)
 * whose requests are answered here, in Node, signing with an anvil dev key and sending to anvil.
 * The dashboard's code is the production code; only the wallet extension is replaced.
 */
export interface TestWallet {
  /** The connected account. */
  readonly address: Hex;
  /** Makes the wallet report another account, as a person switching accounts in the extension. */
  switchAccount(privateKey: Hex): Promise<void>;
  /** Makes the wallet report another chain id, as a person switching networks. */
  switchChain(chainId: number): Promise<void>;
  /** Every JSON-RPC method the page asked for, in order. */
  readonly calls: string[];
  /** Makes the wallet refuse the next transaction as a person pressing Reject does (EIP-1193 code 4001). */
  rejectNextTransaction(): void;
}

export const TEST_WALLET_NAME = 'gpufarm Test Wallet';

const requestSchema = z.object({ method: z.string().min(1), params: z.array(z.unknown()).optional() });

/** EIP-1193 error codes the dashboard reacts to. */
const USER_REJECTED = 4001;
const UNRECOGNIZED_CHAIN = 4902;
const UNSUPPORTED_METHOD = 4200;

class ProviderError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

// Runs in the page before its scripts: the provider object forwards every request to the
// `__gfWallet` binding and re-emits what Node pushes with `__gfWalletEmit`.
const PAGE_PROVIDER = `(() => {
  const listeners = new Map();
  const provider = {
    isMetaMask: false,
    async request(args) {
      const answer = await window.__gfWallet(JSON.stringify(args));
      const parsed = JSON.parse(answer);
      if (parsed.error) {
        const error = new Error(parsed.error.message);
        error.code = parsed.error.code;
        throw error;
      }
      return parsed.result;
    },
    on(event, fn) { (listeners.get(event) ?? listeners.set(event, new Set()).get(event)).add(fn); return provider; },
    removeListener(event, fn) { listeners.get(event)?.delete(fn); return provider; },
  };
  window.__gfWalletEmit = (event, value) => { for (const fn of listeners.get(event) ?? []) fn(value); };
  window.ethereum = provider;
  const info = Object.freeze({
    uuid: '6f1c8a52-3d7e-4b0a-9c55-1f6e2b7d9a10',
    name: ${JSON.stringify(TEST_WALLET_NAME)},
    icon: 'data:image/svg+xml,%3Csvg xmlns="http://www.w3.org/2000/svg" width="32" height="32"%3E%3Crect width="32" height="32" fill="%23336"/%3E%3C/svg%3E',
    rdns: 'dev.gpufarm.testwallet',
  });
  const announce = () => window.dispatchEvent(new CustomEvent('eip6963:announceProvider', { detail: Object.freeze({ info, provider }) }));
  window.addEventListener('eip6963:requestProvider', announce);
  announce();
})();`;

/**
 * Injects the wallet into the pages of `context` (call before the first navigation). `rpcUrl` is
 * anvil's; `chainId` the chain the wallet starts on and the only one it can switch to.
 */
export async function injectTestWallet(context: BrowserContext, options: { privateKey: Hex; rpcUrl: string; chainId: number }): Promise<TestWallet> {
  let account = privateKeyToAccount(options.privateKey);
  let chainId = options.chainId;
  const calls: string[] = [];
  let rejectNext = false;
  const emit = async (event: 'accountsChanged' | 'chainChanged', value: unknown) => {
    for (const page of context.pages()) await page.evaluate(`window.__gfWalletEmit(${JSON.stringify(event)}, ${JSON.stringify(value)})`);
  };
  const chainFor = (id: number): Chain => ({
    id,
    name: `chain ${id}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [options.rpcUrl] } },
  });
  const walletFor = (): WalletClient<Transport, Chain, Account> => createWalletClient({ account, chain: chainFor(chainId), transport: http(options.rpcUrl) });
  const forward = async (method: string, params: unknown[]): Promise<unknown> => {
    const res = await fetch(options.rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
    const body = z.object({ result: z.unknown().optional(), error: z.object({ code: z.number(), message: z.string() }).optional() }).parse(await res.json());
    if (body.error) throw new ProviderError(body.error.code, body.error.message);
    return body.result;
  };

  const answer = async (method: string, params: unknown[]): Promise<unknown> => {
    switch (method) {
      case 'eth_requestAccounts':
      case 'eth_accounts':
        return [account.address];
      case 'eth_chainId':
        return numberToHex(chainId);
      case 'net_version':
        return String(chainId);
      case 'wallet_switchEthereumChain': {
        const wanted = Number(z.object({ chainId: z.string() }).parse(params[0]).chainId);
        if (wanted !== options.chainId) throw new ProviderError(UNRECOGNIZED_CHAIN, `chain ${wanted} is not added to this wallet`);
        if (wanted !== chainId) {
          chainId = wanted;
          await emit('chainChanged', numberToHex(wanted));
        }
        return null;
      }
      case 'wallet_requestPermissions':
      case 'wallet_getPermissions':
        return [{ parentCapability: 'eth_accounts' }];
      case 'personal_sign': {
        const [message] = z.tuple([z.string().regex(/^0x[0-9a-fA-F]*$/), z.string()]).parse(params);
        return account.signMessage({ message: { raw: message as Hex } });
      }
      case 'eth_sendTransaction': {
        if (rejectNext) {
          rejectNext = false;
          throw new ProviderError(USER_REJECTED, 'User rejected the request.');
        }
        const tx = z
          .object({ to: z.string().optional(), data: z.string().optional(), value: z.string().optional(), gas: z.string().optional() })
          .parse(params[0]);
        return walletFor().sendTransaction({
          to: tx.to as Hex | undefined,
          data: tx.data as Hex | undefined,
          value: tx.value ? BigInt(tx.value) : undefined,
          gas: tx.gas ? BigInt(tx.gas) : undefined,
        });
      }
      default:
        if (method.startsWith('eth_')) return forward(method, params);
        throw new ProviderError(UNSUPPORTED_METHOD, `the test wallet does not support ${method}`);
    }
  };

  await context.exposeBinding('__gfWallet', async (_source, raw: string) => {
    const { method, params = [] } = requestSchema.parse(JSON.parse(raw));
    calls.push(method);
    try {
      return JSON.stringify({ result: (await answer(method, params)) ?? null });
    } catch (err) {
      const code = err instanceof ProviderError ? err.code : -32603;
      return JSON.stringify({ error: { code, message: errorText(err) } });
    }
  });
  await context.addInitScript(PAGE_PROVIDER);

  return {
    get address() {
      return account.address;
    },
    calls,
    rejectNextTransaction() {
      rejectNext = true;
    },
    async switchAccount(privateKey) {
      account = privateKeyToAccount(privateKey);
      await emit('accountsChanged', [account.address]);
    },
    async switchChain(id) {
      chainId = id;
      await emit('chainChanged', numberToHex(id));
    },
  };
}

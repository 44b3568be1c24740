import type { BrowserContext } from 'playwright-core';
import { isHex, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { z } from 'zod';

/** The name the wallet announces (EIP-6963): the sign-in page's button reads it. */
export const PAGE_WALLET_NAME = 'gpufarm bench wallet';

// Runs in the page before its scripts: announces an EIP-1193 provider whose every request goes
// to the binding below (EIP-6963, as browser wallet extensions do; no window.ethereum).
const ANNOUNCE = `(() => {
  const listeners = new Map();
  const provider = {
    request: async ({ method, params }) => {
      const answer = await window.__gfPageWallet(method, params ?? []);
      if (answer.error) throw Object.assign(new Error(answer.error.message), { code: answer.error.code });
      return answer.result;
    },
    on: (event, fn) => { listeners.set(event, [...(listeners.get(event) ?? []), fn]); return provider; },
    removeListener: (event, fn) => { listeners.set(event, (listeners.get(event) ?? []).filter((f) => f !== fn)); return provider; },
  };
  const info = Object.freeze({ uuid: '6b1d3f9e-8f5e-4c59-9d0c-5d1bbf0c0b11', name: ${JSON.stringify(PAGE_WALLET_NAME)}, rdns: 'dev.gpufarm.bench', icon: 'data:image/svg+xml,%3Csvg xmlns="http://www.w3.org/2000/svg" width="8" height="8"/%3E' });
  const announce = () => window.dispatchEvent(new CustomEvent('eip6963:announceProvider', { detail: Object.freeze({ info, provider }) }));
  window.addEventListener('eip6963:requestProvider', announce);
  announce();
})();`;

const rpcAnswerSchema = z.object({ result: z.unknown().optional(), error: z.object({ code: z.number(), message: z.string() }).optional() });
type Answer = z.infer<typeof rpcAnswerSchema>;

/**
 * Gives every page of `context` a browser wallet holding `privateKey` on chain `chainId`: it
 * signs in Node (personal_sign, typed data) and sends everything else to the node at `rpcUrl`
 * (anvil, whose dev accounts are unlocked, so eth_sendTransaction works). For the bench only.
 */
export async function injectPageWallet(context: BrowserContext, options: { privateKey: Hex; chainId: number; rpcUrl: string }): Promise<void> {
  const account = privateKeyToAccount(options.privateKey);
  const chainHex = `0x${options.chainId.toString(16)}`;
  const rpc = async (method: string, params: unknown[]): Promise<Answer> => {
    const res = await fetch(options.rpcUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
    return rpcAnswerSchema.parse(await res.json());
  };
  const handle = async (method: string, params: unknown[]): Promise<Answer> => {
    switch (method) {
      case 'eth_requestAccounts':
      case 'eth_accounts':
        return { result: [account.address] };
      case 'eth_chainId':
        return { result: chainHex };
      case 'wallet_requestPermissions':
      case 'wallet_getPermissions':
        return { result: [{ parentCapability: 'eth_accounts' }] };
      case 'wallet_switchEthereumChain': {
        const wanted = z.tuple([z.object({ chainId: z.string() })]).parse(params)[0].chainId;
        return BigInt(wanted) === BigInt(options.chainId) ? { result: null } : { error: { code: 4902, message: `this wallet knows only chain ${options.chainId}` } };
      }
      case 'personal_sign': {
        const [message] = z.tuple([z.string(), z.string()]).parse(params);
        return { result: await account.signMessage({ message: isHex(message) ? { raw: message } : message }) };
      }
      case 'eth_signTypedData_v4': {
        const [, typed] = z.tuple([z.string(), z.string()]).parse(params);
        return { result: await account.signTypedData(JSON.parse(typed) as Parameters<typeof account.signTypedData>[0]) };
      }
      default:
        return rpc(method, params);
    }
  };
  await context.exposeBinding('__gfPageWallet', async (_source, method: unknown, params: unknown) => {
    try {
      return await handle(z.string().parse(method), z.array(z.unknown()).parse(params));
    } catch (err) {
      return { error: { code: -32603, message: err instanceof Error ? err.message : String(err) } };
    }
  });
  await context.addInitScript(ANNOUNCE);
}

import { randomBytes } from 'node:crypto';
import { ApiError, errorForField } from '@gpufarm/shared';
import type { Hex } from 'viem';
import { parseSiweMessage } from 'viem/siwe';
import type { Queryable } from '../db/database.js';
import { takeSiweNonce } from './store.js';
import { checkWalletSignature, type WalletSignatureDeps } from './wallet-signature.js';

/** A nonce is usable this long after it is issued, and a message must be issued within it. */
export const NONCE_TTL_SECONDS = 300;
/** How far in the future a message's issuedAt (or notBefore) may be: the wallet's clock may run ahead. */
export const CLOCK_SKEW_MS = 60_000;

/** 32 hex characters (128 random bits): EIP-4361 wants at least 8 alphanumerics. */
export function newSiweNonce(): string {
  return randomBytes(16).toString('hex');
}

export interface SignInDeps {
  db: Queryable;
  /** Checks the signature: an EOA's is recovered, ERC-1271 and ERC-6492 wallets are asked on chain at a bounded cost. */
  wallets: WalletSignatureDeps;
  now?: () => Date;
}

export interface SignInExpectation {
  /** The deployment's public URL: its host is the message's domain and its origin the URI's. */
  publicUrl: string;
  /** The Host the request came to (the dashboard's own). */
  requestHost: string;
  chainId: number;
}

const REQUIRED_FIELDS = ['domain', 'address', 'uri', 'version', 'chainId', 'nonce', 'issuedAt'] as const;

function refused(check: string): ApiError {
  return new ApiError('invalid_api_key', `${check}: sign in again.`);
}

function malformed(problem: string): never {
  throw errorForField('invalid_request', 'message', problem);
}

/**
 * Checks a Sign-In with Ethereum message and its signature against this deployment, in order:
 * its fields (400 `invalid_request` naming the one missing or malformed), the Host, domain, URI
 * and chain, the times, then takes the nonce (single use, even when a later check fails; issued
 * to the browser whose cookie hashes to `browserHash`, so a message signed for one browser's
 * nonce signs in no other) and verifies the signature. Every refusal is a 401 `invalid_api_key` saying which check failed.
 * Returns the signing address (lower-case) and chain.
 */
export async function checkSignIn(
  deps: SignInDeps,
  params: { message: string; signature: Hex; browserHash: string | null; expected: SignInExpectation; clientAddress: string },
): Promise<{ address: `0x${string}`; chainId: number }> {
  const { message, signature, expected } = params;
  const now = deps.now?.() ?? new Date();
  const parsed = parseSiweMessage(message);
  for (const field of REQUIRED_FIELDS) {
    if (parsed[field] === undefined || parsed[field] === '') malformed(`is not an EIP-4361 message: it has no ${field}`);
  }
  const { domain, address, uri, chainId, nonce, issuedAt, expirationTime, notBefore } = parsed as Required<typeof parsed>;
  if (!/^0x[0-9a-fA-F]{40}$/.test(address)) malformed('has an address that is not a 0x-prefixed 20-byte hex address');
  for (const [field, value] of [['issuedAt', issuedAt], ['expirationTime', expirationTime], ['notBefore', notBefore]] as const) {
    if (value !== undefined && Number.isNaN(value.getTime())) malformed(`has a ${field} that is not an RFC 3339 date-time`);
  }

  const servedAt = new URL(expected.publicUrl);
  const requestHost = expected.requestHost.toLowerCase();
  if (requestHost !== servedAt.host) throw refused(`This dashboard is served at ${servedAt.host}, but the request came to ${requestHost}; open ${expected.publicUrl}/dashboard/`);
  if (domain.toLowerCase() !== servedAt.host) throw refused(`The message's domain ${domain} is not this dashboard's (${servedAt.host})`);
  if (!URL.canParse(uri) || new URL(uri).origin !== servedAt.origin) throw refused(`The message's URI ${uri} is not on this dashboard's origin (${servedAt.origin})`);
  if (chainId !== expected.chainId) throw refused(`The message is for chain ${chainId}, but this deployment is on chain ${expected.chainId}; switch your wallet to chain ${expected.chainId}`);
  if (issuedAt.getTime() > now.getTime() + CLOCK_SKEW_MS) throw refused(`The message's issuedAt ${issuedAt.toISOString()} is in the future; check your clock`);
  if (issuedAt.getTime() < now.getTime() - NONCE_TTL_SECONDS * 1000) throw refused(`The message was issued at ${issuedAt.toISOString()}, more than ${NONCE_TTL_SECONDS / 60} minutes ago`);
  if (expirationTime !== undefined && expirationTime.getTime() <= now.getTime()) throw refused(`The message expired at ${expirationTime.toISOString()}`);
  if (notBefore !== undefined && notBefore.getTime() > now.getTime() + CLOCK_SKEW_MS) throw refused(`The message is not valid before ${notBefore.toISOString()}`);

  const taken = await takeSiweNonce(deps.db, nonce, params.browserHash);
  if (taken === 'unknown') throw refused(`The nonce ${nonce} was not issued by this server or was already used`);
  if (taken === 'expired') throw refused(`The nonce ${nonce} expired`);
  if (taken === 'other_browser') throw refused(`The nonce ${nonce} was issued to another browser (or this browser refused its cookie)`);

  const verdict = await checkWalletSignature(deps.wallets, { address: address as Hex, message, signature, clientAddress: params.clientAddress });
  if (!verdict.valid) throw refused(verdict.refusal ?? `The signature is not ${address}'s signature of this message`);
  return { address: address.toLowerCase() as `0x${string}`, chainId };
}

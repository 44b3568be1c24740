import type { FastifyInstance } from 'fastify';
import t from 'tap';
import { concat, encodeFunctionData, keccak256, maxUint256, serializeErc6492Signature, toHex, type Hex } from 'viem';
import { CHAIN_CHECKS_PER_CLIENT, MAX_SIGNATURE_BYTES, SIGNATURE_CHECK_GAS } from '../src/web/wallet-signature.js';
import { createPostgresTestDatabase } from './helpers/database.js';
import { assertError } from './helpers/assert.js';
import { buildEscrowTestApp, deployTestWallet, deployTestWalletFactory, ON_RECEIVE, startTestChain } from './helpers/chain.js';
import { testWalletFactoryAbi } from './helpers/test-contracts.generated.js';
import { buildWebTestApp, devWallet, fakeWebDist, HOST, issueNonce, postSignIn, PUBLIC_URL, signIn, siweMessage, type SiweSigner } from './helpers/web.js';

t.test('behavior: a smart-contract wallet (ERC-1271) signs in through the chain', async (t) => {
  const chain = await startTestChain(t);
  const { db } = await createPostgresTestDatabase(t);
  const { app } = await buildEscrowTestApp(t, chain, { db, env: { GF_PUBLIC_URL: PUBLIC_URL, GF_WEB_DIR: fakeWebDist(t) } });
  const walletAddress = await deployTestWallet(chain, 1, ON_RECEIVE.accept);
  // The wallet's owner (dev account 1) signs for it; the contract checks that signature.
  const contractWallet: SiweSigner = { address: walletAddress, signMessage: (message) => devWallet(1).signMessage(message) };
  const signedIn = await signIn(app, contractWallet);
  t.equal(signedIn.address, walletAddress.toLowerCase(), 'the session is the contract wallet’s');

  const notOwner: SiweSigner = { address: walletAddress, signMessage: (message) => devWallet(2).signMessage(message) };
  const message = siweMessage(notOwner.address, await issueNonce(app));
  const refused = await postSignIn(app, { message, signature: await notOwner.signMessage(message) });
  assertError(t, refused, 'invalid_api_key', 401);
  t.match(refused.json().error.message, /The signature is not 0x[0-9a-fA-F]{40}'s signature of this message: sign in again\./);
});

t.test('behavior: without a chain, a key’s signature still signs in', async (t) => {
  const { app } = await buildWebTestApp(t);
  t.equal((await signIn(app, devWallet(3))).address, devWallet(3).address.toLowerCase());
});

/**
 * ERC-6492: a wallet not deployed yet signs through its factory, which the chain runs inside the
 * service's `eth_call`: code any anonymous visitor chooses. The call gets at most
 * SIGNATURE_CHECK_GAS, signatures at most MAX_SIGNATURE_BYTES, and a client at most
 * CHAIN_CHECKS_PER_CLIENT such checks a minute; an EOA's signature never reaches the chain.
 */
t.test('ERC-6492 sign-ins at a bounded cost (anvil)', async (t) => {
  const chain = await startTestChain(t);
  const factory = await deployTestWalletFactory(chain);
  const owner = devWallet(2);
  /** A signer for the wallet `deploy(owner, salt, burnGas)` makes, signing before it exists (6492-wrapped). */
  const counterfactual = async (burnGas: bigint, factoryData: Hex | null = null): Promise<SiweSigner> => {
    const salt = keccak256(toHex(`salt-${burnGas}-${Math.random()}`));
    const address = await chain.publicClient.readContract({ address: factory, abi: testWalletFactoryAbi, functionName: 'walletAddress', args: [owner.address, salt] });
    const data = factoryData ?? encodeFunctionData({ abi: testWalletFactoryAbi, functionName: 'deploy', args: [owner.address, salt, burnGas] });
    return { address, signMessage: async (message) => serializeErc6492Signature({ address: factory, data, signature: await owner.signMessage(message) }) };
  };
  const app = async () => (await buildEscrowTestApp(t, chain, { db: (await createPostgresTestDatabase(t)).db, env: { GF_PUBLIC_URL: PUBLIC_URL, GF_WEB_DIR: fakeWebDist(t) } })).app;
  const attempt = async (server: FastifyInstance, signer: SiweSigner) => {
    const message = siweMessage(signer.address, await issueNonce(server));
    return postSignIn(server, { message, signature: await signer.signMessage(message) });
  };

  await t.test('behavior: a smart wallet not deployed yet signs in through its factory', async (t) => {
    const server = await app();
    const wallet = await counterfactual(0n);
    t.equal(await chain.publicClient.getCode({ address: wallet.address }), undefined, 'the wallet does not exist on chain');
    t.equal((await signIn(server, wallet)).address, wallet.address.toLowerCase(), 'the session is the counterfactual wallet’s');
    t.equal(await chain.publicClient.getCode({ address: wallet.address }), undefined, 'the check deployed nothing: it was a call');
  });

  await t.test('error: a factory that burns more gas than the check may use is refused in the envelope; the server goes on', async (t) => {
    const server = await app();
    // 5,000,000 gas then a valid wallet: accepted on a node's default call gas, not within the cap.
    for (const burn of [SIGNATURE_CHECK_GAS + 3_000_000n, maxUint256]) {
      const res = await attempt(server, await counterfactual(burn));
      assertError(t, res, 'invalid_api_key', 401);
      t.match(res.json().error.message, /^The signature is not 0x[0-9a-fA-F]{40}'s signature of this message: sign in again\.$/, `burning ${burn === maxUint256 ? 'all its' : burn} gas`);
    }
    t.equal((await signIn(server, devWallet(1))).address, devWallet(1).address.toLowerCase(), 'a key’s sign-in right after is answered');
  });

  await t.test('error: invalid_request: a signature over 8192 bytes is refused before anything runs, naming the field', async (t) => {
    const server = await app();
    const wallet = await counterfactual(0n, `0x${'00'.repeat(MAX_SIGNATURE_BYTES)}`);
    const res = await attempt(server, wallet);
    assertError(t, res, 'invalid_request', 400);
    t.match(res.json().error.details, [{ field: 'signature', message: /at most 8192 bytes/ }]);
  });

  await t.test('error: invalid_api_key: an ERC-8010 (EIP-7702) signature, whose deployment call viem would run uncapped, is refused', async (t) => {
    const server = await app();
    const message = siweMessage(owner.address, await issueNonce(server));
    const signature = concat([await owner.signMessage(message), `0x${'8010'.repeat(16)}`]);
    const res = await postSignIn(server, { message, signature });
    assertError(t, res, 'invalid_api_key', 401);
    t.match(res.json().error.message, /ERC-8010 \(EIP-7702\) signatures are not accepted at sign-in/);
  });

  await t.test('error: rate_limited: a client gets CHAIN_CHECKS_PER_CLIENT contract-wallet checks a minute; keys’ sign-ins do not count', async (t) => {
    const server = await app();
    const hostile = await counterfactual(maxUint256);
    for (let i = 0; i < CHAIN_CHECKS_PER_CLIENT.max; i++) assertError(t, await attempt(server, hostile), 'invalid_api_key', 401);
    const limited = await attempt(server, hostile);
    assertError(t, limited, 'rate_limited', 429);
    t.match(limited.json().error.message, /sign_in_chain_checks limit is 10 per 60 s/);
    t.ok(Number(limited.headers['retry-after']) >= 1, 'Retry-After');
    t.equal((await signIn(server, devWallet(3))).address, devWallet(3).address.toLowerCase(), 'a key’s signature is checked without the chain, so it still signs in');
    const other = await server.inject({ method: 'POST', url: '/dashboard/api/auth/nonce', headers: { host: HOST }, remoteAddress: '10.9.8.7' });
    const message = siweMessage(hostile.address, other.json().nonce as string);
    const fromElsewhere = await server.inject({ method: 'POST', url: '/dashboard/api/auth/sign-in', headers: { host: HOST }, remoteAddress: '10.9.8.7', payload: { message, signature: await hostile.signMessage(message) } });
    assertError(t, fromElsewhere, 'invalid_api_key', 401);
  });
});

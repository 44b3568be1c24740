import t from 'tap';
import { createPgliteTestDatabase } from './helpers/database.js';
import { assertError } from './helpers/assert.js';
import { buildEscrowTestApp, deployTestWallet, ON_RECEIVE, startTestChain } from './helpers/chain.js';
import { buildWebTestApp, devWallet, fakeWebDist, issueNonce, postSignIn, PUBLIC_URL, signIn, siweMessage, type SiweSigner } from './helpers/web.js';

t.test('behavior: a smart-contract wallet (ERC-1271) signs in through the chain', async (t) => {
  const chain = await startTestChain(t);
  const { db } = await createPgliteTestDatabase(t);
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

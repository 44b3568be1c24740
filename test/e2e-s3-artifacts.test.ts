import t from 'tap';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { startS3rver } from '@gpufarm/control-plane/testing/s3rver';
import { enrollAgent } from './helpers/agent.js';
import { Customer } from './helpers/customer.js';
import { busyboxSpec } from './helpers/jobs.js';
import { Marketplace } from './helpers/marketplace.js';

/**
 * End to end, separate processes, with the S3 store: s3rver, the control plane and the agent
 * daemon. The daemon's outputs and log go straight to the bucket; the control plane only plans
 * and completes the uploads (and reads the objects back).
 */

t.setTimeout(300_000);

const FARM = 'e2e-s3';
const PAYOUT = privateKeyToAddress(generatePrivateKey());

const s3 = await startS3rver(t);
// Requests are logged (info): the test reads which upload routes the agent called.
const market = await Marketplace.start(t, { env: { ...s3.env, GF_LOG_LEVEL: 'info' } });
const agent = await enrollAgent(market, { name: 'agent', farm: FARM, payout: PAYOUT, priceUsd: '0.60', gpus: '1x rtx-4090-24gb' });
agent.start();
await market.waitForCapacity(FARM, 1);
const customer = await Customer.create(market, 1);

t.test('behavior: with S3 the daemon uploads outputs and log to the bucket, not to the control plane; the hashes match and the presigned download verifies', async (t) => {
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, 'head -c 3000000 /dev/urandom > /output/data.bin; echo written'));
  const { jobStatus } = await customer.tailLogs(created.job.id);
  t.equal(jobStatus, 'COMPLETED');
  const job = await customer.getJob(created.job.id);
  t.equal(job.result?.hashesMatch, true);
  t.equal(job.result?.hostHash, job.result?.serverHash);
  const download = await customer.download(job.result!.outputArtifactId!);
  t.ok(download.location.startsWith(s3.endpoint), 'a presigned GET of the bucket');
  t.equal(download.sha256, job.result!.serverHash, 'the customer gets the bytes the agent hashed');
  t.ok(download.bytes.length > 3_000_000);
  const log = await customer.download(job.result!.logArtifactId!);
  t.equal(log.sha256, log.sha256Header);

  const logged = market.controlPlane.output();
  t.match(logged, /"method":"POST","url":"\/agent\/v1\/assignments\/[^"/]+\/outputs\/output-0\/uploads\/upl_[0-9a-z]{26}"/, 'the agent completed a direct upload of its output');
  t.match(logged, /"method":"POST","url":"\/agent\/v1\/assignments\/[^"/]+\/outputs\/log\/uploads\/upl_[0-9a-z]{26}"/, 'and of its log');
  t.notMatch(logged, /"method":"PUT","url":"\/agent\/v1\/assignments\//, 'no bytes were PUT to the control plane');
});

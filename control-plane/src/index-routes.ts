import { SERVICE_VERSION, type ServiceIndex } from '@gpufarm/shared';
import type { FastifyPluginAsync } from 'fastify';
import { getAddress } from 'viem';
import type { Config } from './config.js';

/**
 * The service's canary as a customer runs it: `command` with `<iterations>` replaced by a count
 * (1 to 999,999,999) and `deterministic: true` makes a job whose result the server recomputes.
 * null: the deployment has no canary image (`GF_CANARY_IMAGE`).
 */
function canaryOf(config: Config) {
  const canary = config.execution.canaryImage;
  if (!canary) return null;
  return { image: `${canary.repository}@${canary.digest}`, repository: canary.repository, digest: canary.digest, command: ['sha256-chain', '<iterations>'] };
}

export interface IndexRoutesOptions {
  config: Config;
  /** The escrow the funding calls go to (the app's escrow deployment); null without one. */
  escrowAddress: string | null;
}

/** `GET /v1`: what this deployment is and where everything lives. */
export const indexRoutes: FastifyPluginAsync<IndexRoutesOptions> = async (app, { config, escrowAddress }) => {
  // Serialized once per public URL, which with PORT=0 is known only once the server listens.
  let built = { publicUrl: '', body: '' };
  app.get('/v1', { config: { auth: 'public' } }, async (_request, reply) => {
    if (built.publicUrl !== config.publicUrl) built = { publicUrl: config.publicUrl, body: indexBody(config, escrowAddress) };
    return reply.type('application/json; charset=utf-8').send(built.body);
  });
};

function indexBody(config: Config, escrowAddress: string | null): string {
  const base = `${config.publicUrl}/v1`;
  const body: ServiceIndex = {
    object: 'index',
    service: 'gpufarm',
    serviceVersion: SERVICE_VERSION,
    chainId: config.chainId,
    environment: config.environment,
    apiKeyPrefix: config.environment === 'mainnet' ? 'gf_live_' : 'gf_test_',
    canary: canaryOf(config),
    simulatedMachines: { allowed: config.execution.allowSimulatedMachines },
    escrow: escrowAddress ? { address: getAddress(escrowAddress) } : null,
    links: {
      self: base,
      capacity: `${base}/capacity`,
      pricing: `${base}/pricing`,
      jobs: `${base}/jobs`,
      job: `${base}/jobs/{id}`,
      jobLogs: `${base}/jobs/{id}/logs`,
      jobFunding: `${base}/jobs/{id}/funding`,
      jobFundConfirm: `${base}/jobs/{id}/fund-confirm`,
      jobCancel: `${base}/jobs/{id}/cancel`,
      artifact: `${base}/artifacts/{id}`,
      billing: `${base}/billing`,
      openapi: `${base}/openapi.json`,
      docs: `${config.publicUrl}/docs`,
    },
  };
  return JSON.stringify(body);
}

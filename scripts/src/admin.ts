import { parseArgs } from 'node:util';
import { API_KEY_SCOPES, type ApiKeyScope, errorText, formatMicroUsd, parseUsdToMicroUsd } from '@gpufarm/shared';
import { createEnrollmentToken, ENROLLMENT_TOKEN_TTL_SECONDS } from '@gpufarm/control-plane/farms';
import { createApiKey, keyEnvironmentFor, revokeApiKey, setAccountStatus } from '@gpufarm/control-plane/auth';
import { ConfigError, loadConfig, type Config } from '@gpufarm/control-plane/config';
import { migrate, openDatabase } from '@gpufarm/control-plane/db';
import { syncCatalog } from '@gpufarm/control-plane/fleet';
import { readLiveLocalState } from '@gpufarm/control-plane/local-state';
import { UsageError } from './usage-error.js';

const USAGE = `usage: npm run admin -- <command> [options]

commands:
  create-key --wallet 0x<40 hex> --scopes jobs:create,jobs:read[,...] [--label TEXT]
      creates the account for that primary wallet if needed and a new API key; prints the key once
  revoke-key --id key_...
  suspend-account --id acct_...
  reactivate-account --id acct_...
  create-enrollment-token --farm SLUG --region KEY --price USD [--payout 0x<40 hex>] [--name TEXT] [--label TEXT]
      creates the farm if needed and a one-time token for \`gf-agent enroll\` (valid one day);
      machines enrolled with it are offered in that region at that price per GPU hour;
      --payout (where the farm's earnings are released) is required for a farm that has none;
      a new --payout for a farm removes the operator wallets its old payout wallet listed

scopes: ${API_KEY_SCOPES.join(', ')}
It talks to the local control plane started by \`npm start\` when one runs on the embedded
database, and otherwise to the database itself (DATABASE_URL, or the embedded one).`;

/** What an admin command needs: the same operations over HTTP or straight on the database. */
interface AdminPort {
  createKey(params: { walletAddress: string; scopes: ApiKeyScope[]; label: string | null }): Promise<{ key: string; keyId: string; accountId: string; walletAddress: string; scopes: string[] }>;
  revokeKey(id: string): Promise<boolean>;
  setAccountStatus(id: string, action: 'suspend' | 'reactivate'): Promise<boolean>;
  createEnrollmentToken(params: EnrollmentTokenParams): Promise<EnrollmentTokenCreated>;
  close(): Promise<void>;
}

interface EnrollmentTokenParams {
  farm: string;
  farmName: string | null;
  payoutAddress: string | null;
  regionKey: string;
  /** USD per GPU hour, as typed. */
  pricePerGpuHour: string;
  label: string | null;
}
interface EnrollmentTokenCreated {
  token: string;
  farm: { slug: string; name: string };
  regionKey: string;
  pricePerGpuHour: string | null;
  expiresAt: string;
  /** Set when --payout replaced the farm's payout address (its listed operator wallets were removed). */
  payoutChange: { from: string; to: string; operatorsRemoved: string[] } | null;
}

async function httpPort(url: string, adminToken: string): Promise<AdminPort> {
  const call = async (path: string, body?: unknown) => {
    const response = await fetch(`${url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const json = (await response.json()) as Record<string, unknown> & { error?: { code: string; message: string } };
    // 404: no such key or account (or, for create, no admin API on that server).
    if (response.status === 404) return null;
    if (!response.ok) throw new Error(`the control plane refused: ${json.error?.code}: ${json.error?.message}`);
    return json;
  };
  return {
    async createKey(params) {
      const created = await call('/admin/v1/api-keys', params);
      if (!created) throw new Error('the running control plane has no admin API; restart it with npm start');
      return created as unknown as Awaited<ReturnType<AdminPort['createKey']>>;
    },
    revokeKey: async (id) => (await call(`/admin/v1/api-keys/${id}/revoke`)) !== null,
    setAccountStatus: async (id, action) => (await call(`/admin/v1/accounts/${id}/${action}`)) !== null,
    async createEnrollmentToken(params) {
      const created = await call('/admin/v1/enrollment-tokens', { ...params, farmName: params.farmName ?? undefined, payoutAddress: params.payoutAddress ?? undefined, label: params.label ?? undefined });
      if (!created) throw new Error('the running control plane has no enrollment API; restart it with npm start');
      return created as unknown as EnrollmentTokenCreated;
    },
    async close() {},
  };
}

async function databasePort(config: Config): Promise<AdminPort> {
  const db = await openDatabase(config);
  await migrate(db);
  // Enrollment tokens name a region of the catalog.
  await syncCatalog(db);
  return {
    createKey: (params) => createApiKey(db, { ...params, environment: keyEnvironmentFor(config.environment), maxActiveKeys: config.accountLimits.apiKeys }),
    revokeKey: async (id) => (await revokeApiKey(db, id)) !== null,
    setAccountStatus: (id, action) => setAccountStatus(db, id, action === 'suspend' ? 'suspended' : 'active'),
    async createEnrollmentToken(params) {
      const price = parseUsdToMicroUsd(params.pricePerGpuHour);
      if (!price.ok || price.microUsd === 0) throw new UsageError(`--price ${price.ok ? 'must be more than 0' : price.message}`);
      const created = await createEnrollmentToken(db, {
        farmSlug: params.farm,
        farmName: params.farmName,
        payoutAddress: params.payoutAddress,
        regionKey: params.regionKey,
        pricePerGpuHourMicroUsd: price.microUsd,
        label: params.label,
        ttlSeconds: ENROLLMENT_TOKEN_TTL_SECONDS,
      });
      return { ...created, pricePerGpuHour: formatMicroUsd(price.microUsd), expiresAt: created.expiresAt.toISOString() };
    },
    close: () => db.close(),
  };
}

function parseScopes(text: string | undefined): ApiKeyScope[] {
  if (!text) throw new UsageError('--scopes is required, for example --scopes jobs:create,jobs:read');
  const scopes = text.split(',').map((s) => s.trim()).filter(Boolean);
  const unknown = scopes.filter((s) => !(API_KEY_SCOPES as readonly string[]).includes(s));
  if (unknown.length > 0 || scopes.length === 0) throw new UsageError(`--scopes: unknown scope ${unknown.join(', ')}; choose from ${API_KEY_SCOPES.join(', ')}`);
  return scopes as ApiKeyScope[];
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  const { values } = parseArgs({ args: rest, options: {
      wallet: { type: 'string' }, scopes: { type: 'string' }, label: { type: 'string' }, id: { type: 'string' },
      farm: { type: 'string' }, region: { type: 'string' }, price: { type: 'string' }, payout: { type: 'string' }, name: { type: 'string' },
    }, strict: true });
  if (!command || command === 'help' || command === '--help') {
    console.log(USAGE);
    return;
  }
  const config = loadConfig();
  const running = config.databaseUrl ? null : readLiveLocalState(config.dataDir);
  if (running && !running.adminToken) throw new Error(`the control plane at ${running.url} has no admin token; restart it with npm start`);
  const port = running?.adminToken ? await httpPort(running.url, running.adminToken) : await databasePort(config);
  try {
    switch (command) {
      case 'create-key': {
        const wallet = values.wallet;
        if (!wallet || !/^0x[0-9a-fA-F]{40}$/.test(wallet)) throw new UsageError('--wallet must be a 0x-prefixed 20-byte hex address');
        const created = await port.createKey({ walletAddress: wallet, scopes: parseScopes(values.scopes), label: values.label ?? null });
        console.log(`account ${created.accountId} (wallet ${created.walletAddress})`);
        console.log(`key id  ${created.keyId}, scopes ${created.scopes.join(', ')}`);
        console.log(`\nAPI key (shown once; only its SHA-256 is stored):\n${created.key}`);
        return;
      }
      case 'revoke-key':
      case 'suspend-account':
      case 'reactivate-account': {
        const id = values.id;
        if (!id) throw new UsageError(`--id is required for ${command}`);
        const done = command === 'revoke-key' ? await port.revokeKey(id) : await port.setAccountStatus(id, command === 'suspend-account' ? 'suspend' : 'reactivate');
        if (!done) throw new Error(`no such ${command === 'revoke-key' ? 'API key' : 'account'}: ${id}`);
        console.log(`${command}: ${id} done`);
        return;
      }
      case 'create-enrollment-token': {
        if (!values.farm) throw new UsageError('--farm is required: the farm\'s slug, such as --farm north-gpu');
        if (!values.region) throw new UsageError('--region is required: a region key, such as --region us-east');
        if (!values.price) throw new UsageError('--price is required: USD per GPU hour, such as --price 0.45');
        if (values.payout !== undefined && !/^0x[0-9a-fA-F]{40}$/.test(values.payout)) throw new UsageError('--payout must be a 0x-prefixed 20-byte hex address');
        const created = await port.createEnrollmentToken({
          farm: values.farm,
          farmName: values.name ?? null,
          payoutAddress: values.payout ?? null,
          regionKey: values.region,
          pricePerGpuHour: values.price,
          label: values.label ?? null,
        });
        console.log(`farm ${created.farm.slug} (${created.farm.name}), region ${created.regionKey}, ${created.pricePerGpuHour ?? 'no'} USD per GPU hour`);
        console.log(`expires ${created.expiresAt}; it enrolls one machine`);
        if (created.payoutChange) {
          const removed = created.payoutChange.operatorsRemoved;
          console.log(`payout address changed from ${created.payoutChange.from} to ${created.payoutChange.to}; ${removed.length > 0 ? `operator wallets removed (the new payout wallet lists its own): ${removed.join(', ')}` : 'the farm listed no operator wallet'}`);
        }
        console.log(`\nEnrollment token (shown once; only its SHA-256 is stored):\n${created.token}`);
        console.log(`\nOn the machine: gf-agent enroll --server <control plane URL> --token ${created.token}`);
        return;
      }
      default:
        throw new UsageError(`unknown command ${command}`);
    }
  } finally {
    await port.close();
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof UsageError || (err instanceof TypeError && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS'))) {
    console.error(`admin: ${err.message}\n\n${USAGE}`);
  } else if (err instanceof ConfigError) {
    console.error(`admin: ${err.message}`);
  } else {
    console.error(`admin: ${errorText(err)}`);
  }
  process.exit(1);
});

import { z } from 'zod';
import type { envSchema as controlPlaneEnvSchema } from '@gpufarm/control-plane/config';
import { clientSettingsSchema, GpufarmError, presentSettings, type SettingDoc } from '@gpufarm/shared';

const booleanFromEnv = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

/**
 * The `GF_*` settings of the scripts themselves (`npm start`, `npm run cluster`, `npm run demo`,
 * `npm run deploy`, the local agent), checked here. `SCRIPT_SETTING_DOCS` says what each means;
 * `npm run docs` writes both into docs/local-marketplace.md.
 */
export const scriptSettingsSchema = z.object({
  GF_SEED_FLEET: z.coerce.number().int().min(0).max(10_000).default(0),
  GF_LOCAL_AGENT: booleanFromEnv.default(true),
  GF_LOCAL_AGENT_GPUS: z.string().min(1).optional(),
  GF_LOCAL_REGISTRY: z.string().regex(/^[A-Za-z0-9.-]+(?::\d{1,5})?$/, 'must be host:port of a registry').optional(),
  GF_CLUSTER_POSTGRES_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').default('postgres://gpufarm:gpufarm@127.0.0.1:5432/postgres'),
  GF_CLUSTER_DATABASE: z.string().regex(/^[a-z_][a-z0-9_]{0,62}$/, 'must be a lower-case SQL name (letters, digits, _)').default('gpufarm_cluster'),
  GF_CLUSTER_PORT: z.coerce.number().int().min(1).max(65_525).default(8800),
  GF_DEPLOYER_PRIVATE_KEY: z.string().regex(/^0x[0-9a-fA-F]{64}$/, 'must be 0x followed by 64 hex digits').optional(),
});

export const SCRIPT_SETTING_DOCS: Record<keyof z.input<typeof scriptSettingsSchema>, SettingDoc> = {
  GF_SEED_FLEET: { description: '`npm start`: seed this many simulated machines (which never run jobs) into an empty database' },
  GF_LOCAL_AGENT: { description: '`npm start`, `npm run cluster`: `false` or `0` starts no local agent (and prepares no Docker)' },
  GF_LOCAL_AGENT_GPUS: { default: 'unset (simulated `1x rtx-4090-24gb` without `nvidia-smi`)', description: 'the local agent\'s GPUs: `real`, or a simulated spec such as `2x l4-24gb`' },
  GF_LOCAL_REGISTRY: { default: 'unset (`127.0.0.1:5000`)', description: 'the registry `scripts/prepare-docker.sh` and `scripts/build-images.sh` use' },
  GF_CLUSTER_POSTGRES_URL: { description: '`npm run cluster`: the PostgreSQL server the cluster\'s database is made in' },
  GF_CLUSTER_DATABASE: { description: '`npm run cluster`: the cluster\'s database in that server, made when missing' },
  GF_CLUSTER_PORT: { description: '`npm run cluster`: HAProxy\'s port; the replicas listen on the next three, its stats page on this + 9' },
  GF_DEPLOYER_PRIVATE_KEY: { description: '`npm run deploy`: the key that deploys the escrow (required there); never printed' },
};

/**
 * Settings of the control plane that the scripts look at before passing them on:
 * only whether one is set, and its text (the control plane's schema checks it when it starts;
 * its table is docs/deploy/configuration.md).
 */
const PASSED_ON = [
  'GF_ADMIN_TOKEN',
  'GF_ADMIN_WALLETS',
  'GF_CANARY_IMAGE',
  'GF_SHELL_IMAGE',
  'GF_RPC_URL',
  'GF_CHAIN_ID',
  'GF_CHAIN_HEALTH_MS',
  'GF_ESCROW_SWEEP_MS',
  'GF_LOG_LEVEL',
  'GF_DATA_DIR',
] as const satisfies ReadonlyArray<keyof z.input<typeof controlPlaneEnvSchema>>;
const passedOnSchema = z.object(Object.fromEntries(PASSED_ON.map((name) => [name, z.string().min(1).optional()])) as Record<(typeof PASSED_ON)[number], z.ZodOptional<z.ZodString>>);

/** With `gf`'s endpoint and key, which `npm run demo` reads as `gf` does. */
export const scriptsEnvSchema = scriptSettingsSchema.extend(passedOnSchema.shape).extend(clientSettingsSchema.pick({ GF_ENDPOINT: true, GF_API_KEY: true }).shape);
export type ScriptsEnv = z.output<typeof scriptsEnvSchema>;

/** A setting of the environment the scripts cannot use; the message names each. */
export class ScriptsEnvError extends GpufarmError<'environment'> {
  constructor(message: string) {
    super('environment', message);
  }
}

/**
 * The scripts' view of the environment: their own settings checked, the passed-on ones as set.
 * An empty variable means unset (`VAR= npm start`), as the control plane reads it. A bad value
 * throws a ScriptsEnvError naming the variable.
 */
export function scriptsEnv(env: NodeJS.ProcessEnv = process.env): ScriptsEnv {
  const present = presentSettings(Object.keys(scriptsEnvSchema.shape), env);
  const parsed = scriptsEnvSchema.safeParse(present);
  if (!parsed.success) {
    const secret = (name: string) => name === 'GF_DEPLOYER_PRIVATE_KEY' || name === 'GF_ADMIN_TOKEN' || name === 'GF_API_KEY';
    throw new ScriptsEnvError(parsed.error.issues.map((issue) => {
      const name = String(issue.path[0]);
      return `${name}: ${issue.message} (got ${secret(name) ? '[redacted]' : JSON.stringify(present[name])})`;
    }).join('\n'));
  }
  return parsed.data;
}

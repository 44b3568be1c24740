import { z } from 'zod';
import { clientSettingsSchema, presentSettings } from '@gpufarm/shared';
import { createClient, type GfClient } from '../client.js';
import type { RequestEvent } from '../transport.js';
import { configPath, DEFAULT_ENDPOINT, DEFAULT_PROFILE, profileNameSchema, readConfig } from './config.js';
import { UsageError } from './exit.js';

const globalSchema = z.object({
  endpoint: z.url().optional(),
  apiKey: z.string().min(1).optional(),
  profile: profileNameSchema.optional(),
  json: z.boolean().optional(),
  explain: z.boolean().optional(),
});

/** `gf`'s environment variables (`clientSettingsSchema`), an empty one unset; a bad one is a UsageError naming it. */
export function clientEnv(env: NodeJS.ProcessEnv): z.output<typeof clientSettingsSchema> {
  return parseInput(clientSettingsSchema, presentSettings(Object.keys(clientSettingsSchema.shape), env), 'environment variable');
}

/** Where the endpoint and the key came from, for `gf whoami`. */
export type Source = 'flag' | 'env' | 'profile' | 'default' | 'none';

export interface Context {
  client: GfClient;
  endpoint: string;
  endpointSource: Source;
  apiKey: string | undefined;
  apiKeySource: Source;
  profile: string;
  configPath: string;
  /** The chain RPC for funding: `--rpc-url` (the command's) > GF_RPC_URL > profile. */
  rpcUrl: (flag: string | undefined) => string | undefined;
  json: boolean;
  explain: boolean;
  /** Whether stderr is a terminal (spinners and progress bars only then). */
  interactive: boolean;
}

/** Checks values from the command line or the environment with `schema`; a failure is a usage error naming `what`. */
export function parseInput<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const field = issue.path.length > 0 ? String(issue.path[0]) : '';
  const flag = field && what === 'option' ? `--${field.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}` : field;
  throw new UsageError(`${what === 'option' ? '' : `${what} `}${flag}: ${issue.message}`.trim(), 'Run with --help for the accepted values.');
}

/** One line per HTTP call on stderr: method, URL, status, request id, time (and the retry number). */
export function explainLine(e: RequestEvent): string {
  return `→ ${e.method} ${e.url} ${e.status ?? 'no answer'} ${e.requestId ?? '-'} ${Math.round(e.durationMs)}ms${e.attempt > 0 ? ` (retry ${e.attempt})` : ''}`;
}

/**
 * Resolves the global options: endpoint `--endpoint` > GF_ENDPOINT > profile > the local
 * default, key `--api-key` > GF_API_KEY > profile, profile `--profile` > GF_PROFILE > "default";
 * and makes the client (tracing each call to stderr with `--explain`).
 */
export async function openContext(global: Record<string, unknown>, env: NodeJS.ProcessEnv = process.env): Promise<Context> {
  const g = parseInput(globalSchema, global, 'option');
  const e = clientEnv(env);
  const profileName = g.profile ?? e.GF_PROFILE ?? DEFAULT_PROFILE;
  const path = configPath(env);
  const profile = (await readConfig(path)).profiles[profileName] ?? {};
  const [endpoint, endpointSource]: [string, Source] = g.endpoint
    ? [g.endpoint, 'flag']
    : e.GF_ENDPOINT
      ? [e.GF_ENDPOINT, 'env']
      : profile.endpoint
        ? [profile.endpoint, 'profile']
        : [DEFAULT_ENDPOINT, 'default'];
  const [apiKey, apiKeySource]: [string | undefined, Source] = g.apiKey ? [g.apiKey, 'flag'] : e.GF_API_KEY ? [e.GF_API_KEY, 'env'] : profile.api_key ? [profile.api_key, 'profile'] : [undefined, 'none'];
  const explain = g.explain ?? false;
  const client = createClient({
    baseUrl: endpoint,
    apiKey,
    onRequest: explain ? (event) => process.stderr.write(`${explainLine(event)}\n`) : undefined,
  });
  return {
    client,
    endpoint,
    endpointSource,
    apiKey,
    apiKeySource,
    profile: profileName,
    configPath: path,
    rpcUrl: (flag) => flag ?? e.GF_RPC_URL ?? profile.rpc_url,
    json: g.json ?? false,
    explain,
    interactive: process.stderr.isTTY === true,
  };
}

/** Prints `value` as the only thing on stdout (two-space JSON). */
export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

/** A key shown without its secret part: its prefix and last four characters. */
export function maskKey(key: string): string {
  const prefix = /^gf_(live|test)_/.exec(key)?.[0] ?? '';
  return `${prefix}…${key.slice(-4)}`;
}

import { GfError } from '../../errors.js';
import { maskKey, openContext, printJson } from '../context.js';
import { EXIT } from '../exit.js';
import type { CommandInput } from '../program.js';

/** `gf whoami`: the endpoint, profile and key in use (and where each came from), checked against the API. */
export async function run({ global }: CommandInput): Promise<number> {
  const ctx = await openContext(global);
  const index = await ctx.client.index();
  let keyStatus: 'valid' | 'missing' | 'insufficient_scope' = ctx.apiKey ? 'valid' : 'missing';
  if (ctx.apiKey) {
    try {
      await ctx.client.jobs.list({ limit: 1 });
    } catch (err) {
      if (!(err instanceof GfError && err.code === 'insufficient_scope')) throw err;
      keyStatus = 'insufficient_scope';
    }
  }
  const summary = {
    profile: ctx.profile,
    configPath: ctx.configPath,
    endpoint: ctx.endpoint,
    endpointSource: ctx.endpointSource,
    apiKey: ctx.apiKey ? maskKey(ctx.apiKey) : null,
    apiKeySource: ctx.apiKeySource,
    keyStatus,
    environment: index.environment,
    chainId: index.chainId,
    serviceVersion: index.serviceVersion,
  };
  if (ctx.json) {
    printJson(summary);
    return EXIT.ok;
  }
  const rows: [string, string][] = [
    ['endpoint', `${ctx.endpoint} (from ${ctx.endpointSource})`],
    ['profile', `${ctx.profile} (${ctx.configPath})`],
    ['api key', ctx.apiKey ? `${maskKey(ctx.apiKey)} (from ${ctx.apiKeySource}; ${keyStatus === 'valid' ? 'accepted' : 'accepted, but lacks jobs:read'})` : 'none (run gf login)'],
    ['deployment', `${index.environment}, chain ${index.chainId}, service version ${index.serviceVersion}`],
  ];
  for (const [name, value] of rows) process.stdout.write(`${name.padEnd(11)}${value}\n`);
  return EXIT.ok;
}

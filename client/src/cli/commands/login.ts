import { z } from 'zod';
import { GfError } from '../../errors.js';
import { writeProfile } from '../config.js';
import { maskKey, openContext, parseInput, printJson } from '../context.js';
import { EXIT, UsageError } from '../exit.js';
import type { CommandInput } from '../program.js';
import { promptSecret, readStdin } from '../prompt.js';

/**
 * `gf login`: takes the key from --api-key, else stdin (or a prompt on a terminal), checks it
 * with one authenticated call, and only then stores it with the endpoint in the profile.
 */
const optionsSchema = z.object({ rpcUrl: z.url({ protocol: /^https?$/ }).optional() });

export async function run({ opts, global }: CommandInput): Promise<number> {
  const o = parseInput(optionsSchema, opts, 'option');
  const ctx = await openContext({ ...global, apiKey: undefined });
  const given = typeof global.apiKey === 'string' ? global.apiKey : undefined;
  const apiKey = given ?? (process.stdin.isTTY ? await promptSecret(`API key for ${ctx.endpoint}: `) : await readStdin());
  if (!apiKey) throw new UsageError('No API key was given.', 'Pass --api-key KEY, pipe it on stdin, or type it at the prompt.');
  const checked = await openContext({ ...global, apiKey, endpoint: ctx.endpoint });
  const index = await checked.client.index();
  let scopeNote = '';
  try {
    await checked.client.jobs.list({ limit: 1 });
  } catch (err) {
    // A key without jobs:read is still a valid key; anything else means it is not usable.
    if (!(err instanceof GfError && err.code === 'insufficient_scope')) throw err;
    scopeNote = ' (it lacks the jobs:read scope)';
  }
  await writeProfile(ctx.profile, { endpoint: ctx.endpoint, api_key: apiKey, ...(o.rpcUrl ? { rpc_url: o.rpcUrl } : {}) }, ctx.configPath);
  if (ctx.json) {
    printJson({ profile: ctx.profile, endpoint: ctx.endpoint, configPath: ctx.configPath, apiKey: maskKey(apiKey), chainId: index.chainId, environment: index.environment });
  } else {
    process.stdout.write(`Logged in to ${ctx.endpoint} (${index.environment}, chain ${index.chainId}) with ${maskKey(apiKey)}${scopeNote}.\nSaved as profile "${ctx.profile}" in ${ctx.configPath}.\n`);
  }
  return EXIT.ok;
}

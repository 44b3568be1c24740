import { chmod, mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { UsageError } from './exit.js';
import { errorText } from '@gpufarm/shared';

/** Where `npm start` serves the control plane; the endpoint when nothing else names one. */
export const DEFAULT_ENDPOINT = 'http://127.0.0.1:8080';
export const DEFAULT_PROFILE = 'default';

const profileSchema = z.object({ endpoint: z.url().optional(), api_key: z.string().min(1).optional(), rpc_url: z.url().optional() });
const configSchema = z.object({ profiles: z.record(z.string(), profileSchema).default({}) });
export type Profile = z.infer<typeof profileSchema>;
export type ConfigFile = z.infer<typeof configSchema>;

export { profileNameSchema } from '@gpufarm/shared';

/** `$XDG_CONFIG_HOME/gpufarm/config.toml`, or `~/.config/gpufarm/config.toml`. */
export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME && env.XDG_CONFIG_HOME.startsWith('/') ? env.XDG_CONFIG_HOME : join(env.HOME ?? homedir(), '.config');
  return join(base, 'gpufarm', 'config.toml');
}

/** The config file's profiles; an absent file is an empty config, a malformed one a usage error naming the field. */
export async function readConfig(path = configPath()): Promise<ConfigFile> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { profiles: {} };
    throw err;
  }
  const { mode } = await stat(path);
  if ((mode & 0o077) !== 0) {
    process.stderr.write(`gf: warning: ${path} holds API keys and is readable by others (mode ${(mode & 0o777).toString(8).padStart(4, '0')}); run: chmod 600 ${path}\n`);
  }
  const { parse } = await import('smol-toml');
  let raw: unknown;
  try {
    raw = parse(text);
  } catch (err) {
    throw new UsageError(`${path} is not valid TOML: ${errorText(err)}`, 'Fix the file or remove it and run `gf login` again.');
  }
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new UsageError(`${path}: ${issue.path.join('.')}: ${issue.message}`, 'Fix the file or remove it and run `gf login` again.');
  }
  return parsed.data;
}

/**
 * Stores `profile` under `name`, keeping the other profiles. The directory is made 0700 and the
 * file written 0600 under a temporary name then renamed, so the key is never readable by others,
 * not even while it is being written.
 */
export async function writeProfile(name: string, profile: Profile, path = configPath()): Promise<void> {
  const config = await readConfig(path);
  config.profiles[name] = { ...config.profiles[name], ...profile };
  const { stringify } = await import('smol-toml');
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  await chmod(dirname(path), 0o700);
  const temp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  const file = await open(temp, 'wx', 0o600);
  try {
    await file.writeFile(`# gf configuration: one [profiles.NAME] table per endpoint (gf login --profile NAME).\n${stringify(config)}\n`);
    await file.close();
    await rename(temp, path);
  } finally {
    await file.close().catch(() => undefined);
    await rm(temp, { force: true });
  }
}

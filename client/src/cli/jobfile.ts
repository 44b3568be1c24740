import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import { errorText, issuesToDetails, jobCreateRequestSchema } from '@gpufarm/shared';
import { parse as parseYaml } from 'yaml';
import type { JobSpec } from '../client.js';
import { UsageError } from './exit.js';

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * Reads a job spec: YAML for `.yaml`/`.yml`, else JSON (standard input for `-`, as JSON). It is checked against the same schema
 * the server uses, so a wrong field fails here (exit 2, the field named) before any call; the
 * file's own values are sent, not the parsed ones, so the server applies (and reports) its defaults.
 */
export async function readJobFile(path: string): Promise<JobSpec> {
  let text: string;
  try {
    // `-`: the spec on standard input (the dashboard's "Copy as gf run" pipes it in).
    text = path === '-' ? await readStdin() : await readFile(path, 'utf8');
  } catch (err) {
    throw new UsageError(`Cannot read the job file ${path}: ${(err as NodeJS.ErrnoException).code ?? String(err)}.`, 'Check the path given to -f.');
  }
  let value: unknown;
  const yaml = ['.yaml', '.yml'].includes(extname(path).toLowerCase());
  try {
    value = yaml ? parseYaml(text) : JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${path} is not valid ${yaml ? 'YAML' : 'JSON'}: ${errorText(err).split('\n')[0]}`, `Fix the file; a .yaml or .yml name is read as YAML, any other as JSON.`);
  }
  const parsed = jobCreateRequestSchema.safeParse(value);
  if (!parsed.success) {
    const details = issuesToDetails(parsed.error.issues);
    throw new UsageError(`${path} is not a valid job spec: ${details.map((d) => d.message).join('; ')}`, 'Fix the fields named; the spec is described in the API reference (/docs).');
  }
  return value as JobSpec;
}

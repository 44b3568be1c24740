import { basename, resolve } from 'node:path';
import { z } from 'zod';
import { openContext, parseInput, printJson } from '../context.js';
import { EXIT } from '../exit.js';
import { bytesText } from '../format.js';
import type { CommandInput } from '../program.js';
import { createProgressBar } from '../progress.js';

const optionsSchema = z.object({ output: z.string().min(1).optional() });

/**
 * `gf artifacts get ID [-o FILE]`: downloads into FILE (default: the artifact's file name here),
 * verified against the recorded SHA-256; a mismatch leaves no file and exits 4.
 */
export async function run({ args, opts, global }: CommandInput): Promise<number> {
  const o = parseInput(optionsSchema, opts, 'option');
  const ctx = await openContext(global);
  const artifactId = args[0]!;
  const dest = resolve(o.output ?? basename((await ctx.client.artifacts.get(artifactId)).filename));
  const bar = createProgressBar(artifactId, ctx.interactive);
  const result = await ctx.client.downloadArtifact(artifactId, dest, { onProgress: (received, total) => bar.update(received, total) }).finally(() => bar.done());
  if (ctx.json) printJson({ artifactId, path: result.path, sizeBytes: result.sizeBytes, sha256: result.sha256, verified: true });
  else process.stdout.write(`${result.path} ${bytesText(result.sizeBytes)} sha256 ${result.sha256} (verified)\n`);
  return EXIT.ok;
}

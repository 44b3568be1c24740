import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { chmod, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { pipeline } from 'node:stream/promises';
import type { AssignmentInput } from '@gpufarm/shared';
import { RuntimeError } from '../job/errors.js';
import { errorText } from '@gpufarm/shared';

/**
 * Downloads each input over HTTP into `dir/<mountName>`, hashing in the same pass, and keeps it
 * only when its SHA-256 and size equal the assignment's; the file is then made read-only (and
 * mounted read-only at `/input/<mountName>`). A body longer than `sizeBytes` is cut off as soon
 * as it passes the size, so a wrong server cannot fill the disk. The input's URL is the control
 * plane's route that redirects to a short-lived signed URL when asked, so each download asks
 * then, with the headers `headersFor(url)` gives (the machine token, for the control plane only).
 *
 * @throws RuntimeError `input_failed` naming the input and what differed.
 */
export async function downloadInputs(
  inputs: AssignmentInput[],
  dir: string,
  log: (line: string) => void,
  headersFor: (url: string) => Record<string, string> = () => ({}),
): Promise<Array<{ mountName: string; hostPath: string }>> {
  const placed: Array<{ mountName: string; hostPath: string }> = [];
  for (const input of inputs) {
    const target = join(dir, input.mountName);
    const partial = `${target}.partial`;
    const started = Date.now();
    let response: Response;
    try {
      response = await fetch(input.url, { headers: headersFor(input.url), signal: AbortSignal.timeout(30 * 60_000) });
    } catch (err) {
      throw new RuntimeError('input_failed', `input ${input.mountName}: download failed: ${errorText(err)}`, { cause: err });
    }
    if (!response.ok || !response.body) {
      throw new RuntimeError('input_failed', `input ${input.mountName}: download answered HTTP ${response.status}`);
    }
    const hash = createHash('sha256');
    let size = 0;
    const meter = new Transform({
      transform(chunk: Buffer, _enc, done) {
        size += chunk.length;
        if (size > input.sizeBytes) return done(new RuntimeError('input_failed', `input ${input.mountName}: more than the ${input.sizeBytes} bytes announced`));
        hash.update(chunk);
        done(null, chunk);
      },
    });
    try {
      await pipeline(Readable.fromWeb(response.body as WebReadableStream), meter, createWriteStream(partial, { mode: 0o644 }));
    } catch (err) {
      await rm(partial, { force: true });
      if (err instanceof RuntimeError) throw err;
      throw new RuntimeError('input_failed', `input ${input.mountName}: download failed: ${errorText(err)}`, { cause: err });
    }
    const sha256 = hash.digest('hex');
    if (size !== input.sizeBytes || sha256 !== input.sha256) {
      await rm(partial, { force: true });
      throw new RuntimeError('input_failed', `input ${input.mountName}: got ${size} bytes with sha256 ${sha256}, expected ${input.sizeBytes} bytes with sha256 ${input.sha256}`);
    }
    await chmod(partial, 0o444);
    await rename(partial, target);
    log(`input ${input.mountName}: ${size} bytes, sha256 ${sha256} verified in ${Date.now() - started} ms`);
    placed.push({ mountName: input.mountName, hostPath: target });
  }
  return placed;
}

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startS3rver as startS3rverProcess, type S3rverProcess } from '../../src/testing/s3rver.js';

export { s3rverObjectPath } from '../../src/testing/s3rver.js';

interface TestContext {
  teardown(fn: () => unknown): void;
}

export type S3Server = S3rverProcess;

/**
 * s3rver as its own process on a free port and a temp folder, with a bucket made at startup;
 * ended by pid and its folder removed at teardown.
 */
export async function startS3rver(t: TestContext, bucket = 'gf-artifacts'): Promise<S3Server> {
  const dir = mkdtempSync(join(tmpdir(), 'gf-s3rver-'));
  let server: S3rverProcess | null = null;
  t.teardown(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  server = await startS3rverProcess({ dir, bucket });
  return server;
}

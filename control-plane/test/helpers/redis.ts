import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRedisServer, type RedisServerProcess } from '../../src/testing/redis-server.js';

interface TestContext {
  teardown(fn: () => unknown): void;
}

/** redis-server as its own process on a free port, stopped by its pid and its folder removed at teardown. */
export async function startTestRedis(t: TestContext): Promise<RedisServerProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'gf-redis-'));
  let server: RedisServerProcess | null = null;
  t.teardown(async () => {
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  server = await startRedisServer({ dir });
  return server;
}

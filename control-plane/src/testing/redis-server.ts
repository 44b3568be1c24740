import { spawn, spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { createInterface } from 'node:readline';
import { errorText } from '@gpufarm/shared';
import { freePort, LineTail, ownChild, systemEnvironment, type ChildExit } from '@gpufarm/shared/node';

/** The server binary of Debian's `redis-server` package. */
export const REDIS_SERVER_BINARY = 'redis-server';

/** What to run when redis-server is missing (scripts/test-env.sh installs it when run as root). */
export const REDIS_INSTALL_HINT = 'redis-server is not installed: run sudo apt-get update && sudo apt-get install -y --no-install-recommends redis-server (or, as root, bash scripts/test-env.sh)';

/** redis-server's version line, or null when the binary does not run. */
export function redisServerVersion(): string | null {
  const probe = spawnSync(REDIS_SERVER_BINARY, ['--version'], { encoding: 'utf8' });
  return probe.status === 0 ? probe.stdout.trim() : null;
}

/** A redis-server of our own, for shared rate limits in `npm run cluster`, the bench and the tests. */
export interface RedisServerProcess {
  /** `redis://127.0.0.1:<port>`: the replicas' `GF_REDIS_URL`. */
  url: string;
  port: number;
  pid: number;
  /** Resolves when it exited, however it ended. */
  exited: Promise<ChildExit>;
  /** The last lines it printed. */
  lastLines(): string[];
  /** SIGTERM to its pid (redis-server shuts down at once: it keeps nothing on disk); resolves once it exited. */
  stop(): Promise<void>;
}

/**
 * Starts `redis-server` on 127.0.0.1 (`port`, or a free one), keeping nothing on disk (no RDB
 * snapshots, no append-only file; its working folder is `dir`, the temp folder by default), and
 * resolves once it accepts connections. `detached`: in a process group of its own, so a
 * terminal's Ctrl-C reaches only its parent, which stops it in order. Each line it prints also
 * goes to `log`. Throws `REDIS_INSTALL_HINT` when the binary is missing.
 */
export async function startRedisServer(options: { port?: number; dir?: string; detached?: boolean; timeoutMs?: number; log?: (line: string) => void } = {}): Promise<RedisServerProcess> {
  if (redisServerVersion() === null) throw new Error(REDIS_INSTALL_HINT);
  // A free port can be taken between the probe and redis-server's bind: try another then.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(options.port ?? (await freePort()), options);
    } catch (err) {
      if (options.port !== undefined || attempt >= 3 || !/Address already in use/.test(errorText(err))) throw err;
    }
  }
}

async function startOnce(port: number, options: { dir?: string; detached?: boolean; timeoutMs?: number; log?: (line: string) => void }): Promise<RedisServerProcess> {
  const timeoutMs = options.timeoutMs ?? 20_000;
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', options.dir ?? tmpdir(), '--daemonize', 'no'];
  const child = spawn(REDIS_SERVER_BINARY, args, { env: systemEnvironment(), stdio: ['ignore', 'pipe', 'pipe'], detached: options.detached ?? false });
  // However this process ends (short of SIGKILL), redis-server goes with it.
  const { exited, stop } = ownChild(child);
  const tail = new LineTail();
  child.stderr.on('data', (chunk: Buffer) => {
    for (const line of tail.push(chunk)) options.log?.(line);
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not accept connections within ${timeoutMs} ms:\n${tail.lines().join('\n')}`)), timeoutMs);
    void exited.then((exit) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited (${exit.signal ?? String(exit.code)}) before it accepted connections:\n${tail.lines().join('\n')}`));
    });
    // Every line is read, also after the first, so a full pipe never stalls it.
    createInterface({ input: child.stdout }).on('line', (line) => {
      tail.push(`${line}\n`);
      options.log?.(line);
      if (/Ready to accept connections/.test(line)) {
        clearTimeout(timer);
        resolve();
      }
    });
  }).catch(async (err: unknown) => {
    await stop();
    throw err;
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    // Accepting connections, it has a pid: a spawn failure rejects above.
    pid: child.pid!,
    exited,
    lastLines: () => tail.lines(),
    stop,
  };
}

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '@gpufarm/shared/node';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));

export interface BenchServer {
  url: string;
  pid: number;
  /** Stops the child (SIGTERM, then SIGKILL after 5 s) and removes its data dir. */
  stop(): Promise<void>;
}

/** Whether `child` has ended (by an exit code or a signal). */
export function exited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/**
 * Starts the control plane (`control-plane/src/main.ts` through tsx) as a separate process on
 * a free port and waits until `GET /v1` and `readyPath` answer 200. Rate limiting stays on;
 * `X-Forwarded-For` is trusted so the load generator can spread calls over client addresses.
 */
export async function startControlPlaneProcess(options: { databaseUrl: string; readyPath: string; env?: Record<string, string> }): Promise<BenchServer> {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'gf-bench-'));
  // BENCH_CPU_PROFILE_DIR: the server writes a V8 CPU profile there when it stops.
  const profile = process.env.BENCH_CPU_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROFILE_DIR}`] : [];
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', 'control-plane/src/main.ts'], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      DATABASE_URL: options.databaseUrl,
      GF_DATA_DIR: dataDir,
      GF_TRUST_PROXY: 'true',
      GF_LOG_LEVEL: 'warn',
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const url = `http://127.0.0.1:${port}`;

  const stop = async () => {
    if (!exited(child) && child.pid !== undefined) {
      const done = new Promise((resolve) => child.once('exit', resolve));
      process.kill(child.pid, 'SIGTERM');
      const timer = setTimeout(() => {
        if (!exited(child) && child.pid !== undefined) process.kill(child.pid, 'SIGKILL');
      }, 5_000);
      await done;
      clearTimeout(timer);
    }
    rmSync(dataDir, { recursive: true, force: true });
  };

  try {
    const deadline = Date.now() + 90_000;
    for (const path of ['/v1', options.readyPath]) {
      for (;;) {
        if (exited(child)) throw new Error(`the control plane exited (code ${child.exitCode ?? child.signalCode}) before answering:\n${output}`);
        if (Date.now() > deadline) throw new Error(`the control plane did not answer ${path} within 90 s:\n${output}`);
        const status = await fetch(`${url}${path}`, { headers: { 'x-forwarded-for': '192.0.2.1' } }).then((r) => r.status, () => 0);
        if (status === 200) break;
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { url, pid: child.pid!, stop };
}

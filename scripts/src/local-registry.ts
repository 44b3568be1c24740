import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, openSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { systemEnvironment } from '@gpufarm/shared';

export interface LocalRegistry {
  pid: number;
  /** SIGTERM to its pid; resolves once it exited. */
  stop(): Promise<void>;
}

/** True when the registry answers `GET /v2/` within two seconds. */
export async function registryAnswers(address: string): Promise<boolean> {
  try {
    const res = await fetch(`http://${address}/v2/`, { signal: AbortSignal.timeout(2_000) });
    return res.status === 200;
  } catch {
    return false;
  }
}

export function registryInstalled(): boolean {
  return spawnSync('sh', ['-c', 'command -v docker-registry'], { encoding: 'utf8' }).status === 0;
}

/**
 * Starts Debian's `docker-registry` on `address` (no auth, as `scripts/test-env.sh` configures
 * it) with its storage, config and log in `<dir>`, as a child of this process, and waits until
 * it answers. Throws with the log's path when it does not.
 */
export async function startLocalRegistry(address: string, dir: string): Promise<LocalRegistry> {
  const home = resolve(dir);
  mkdirSync(join(home, 'data'), { recursive: true });
  writeFileSync(
    join(home, 'config.yml'),
    `version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: ${join(home, 'data')}\n  delete:\n    enabled: true\nhttp:\n  addr: ${address}\n`,
  );
  const log = openSync(join(home, 'registry.log'), 'a');
  const child = spawn('docker-registry', ['serve', join(home, 'config.yml')], { env: systemEnvironment(), stdio: ['ignore', log, log] });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const killOnExit = () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
  };
  process.once('exit', killOnExit);
  for (let i = 0; i < 40; i++) {
    if (await registryAnswers(address)) {
      return {
        pid: child.pid!,
        async stop() {
          process.off('exit', killOnExit);
          killOnExit();
          await exited;
        },
      };
    }
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  killOnExit();
  throw new Error(`docker-registry did not answer on http://${address}/v2/; see ${join(home, 'registry.log')} (is the port taken?)`);
}

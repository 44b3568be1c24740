import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '@gpufarm/shared/node';
import { ROOT } from './marketplace.js';
import { spawnProcess, type TestProcess } from './processes.js';

const run = promisify(execFile);

/**
 * `npm start`'s script on a fresh data folder and a port of its own, as a newcomer runs it; on
 * teardown it is stopped, the containers its agent left are removed and the folder is deleted.
 * `throughNpm`: `npm start` itself (npm, its shell, then node), in a process group of its own.
 */
export async function npmStart(
  t: { teardown(fn: () => unknown): void },
  dataDir: string,
  env: Record<string, string> = {},
  options: { throughNpm?: boolean } = {},
): Promise<TestProcess> {
  const [command, args] = options.throughNpm ? ['npm', ['start', '--silent']] : [process.execPath, ['--conditions=@gpufarm/source', '--import', 'tsx', join(ROOT, 'scripts/src/start.ts')]];
  // A port of its own (the links and signed URLs it makes name it), as 8080 may be taken.
  const start = spawnProcess('npm-start', command, args, {
    cwd: ROOT,
    env: { GF_DATA_DIR: dataDir, PORT: String(await freePort()), DATABASE_URL: '', GF_ADMIN_TOKEN: '', GF_SEED_FLEET: '', GF_LOCAL_AGENT: '', GF_LOCAL_AGENT_GPUS: '', GF_RPC_URL: '', GF_CANARY_IMAGE: '', ...env },
    processGroup: options.throughNpm ?? false,
  });
  t.teardown(async () => {
    await start.stop(15_000);
    // The agent removes a job's container once its outputs are up; a stop mid-job leaves it.
    const machineId = /Local agent: machine (\S+)/.exec(start.output())?.[1];
    if (machineId) {
      const { stdout } = await run('docker', ['ps', '-aq', '--filter', `label=org.gpufarm.owner=${machineId}`]).catch(() => ({ stdout: '' }));
      const ids = stdout.split('\n').filter(Boolean);
      if (ids.length) await run('docker', ['rm', '-fv', ...ids]).catch(() => undefined);
    }
    rmSync(dataDir, { recursive: true, force: true });
  });
  return start;
}

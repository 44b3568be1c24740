import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '@gpufarm/shared/node';
import { isAlive, onEmergencyExit } from './processes.js';
import { until } from './wait.js';

const INSTALL = 'apt-get install -y postgresql (or run scripts/test-env.sh as root)';

/** Debian's PostgreSQL server binaries: `pg_config --bindir`, else the newest /usr/lib/postgresql/<version>/bin. */
function serverBinaries(): string {
  const candidates: string[] = [];
  try {
    candidates.push(execFileSync('pg_config', ['--bindir'], { encoding: 'utf8' }).trim());
  } catch {
    // no pg_config on PATH: look where Debian installs the server
  }
  const base = '/usr/lib/postgresql';
  if (existsSync(base)) {
    const versions = readdirSync(base).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((v) => join(base, v, 'bin')));
  }
  const found = candidates.find((dir) => ['initdb', 'pg_ctl', 'postgres'].every((bin) => existsSync(join(dir, bin))));
  if (!found) throw new Error(`the PostgreSQL server binaries (initdb, pg_ctl, postgres) are missing: ${INSTALL}`);
  return found;
}

/**
 * A PostgreSQL server of one test's own, in a temporary folder, on a free port of 127.0.0.1
 * with trust authentication, so the test can stop and start it without touching the shared
 * server other test files use. Run as the `postgres` user when this process is root (the
 * server refuses root). Stopped by its postmaster's pid and its folder removed at teardown.
 */
export class PostgresServer {
  private pid: number | null = null;
  private forget: () => void = () => {};

  private constructor(
    private readonly bin: string,
    private readonly dir: string,
    readonly port: number,
    private readonly asPostgres: boolean,
  ) {}

  /** `postgres://postgres@127.0.0.1:PORT/postgres`: the superuser's URL, for creating databases. */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  static async start(t: { teardown(fn: () => unknown): void }): Promise<PostgresServer> {
    const bin = serverBinaries();
    const root = mkdtempSync(join(tmpdir(), 'gf-pg-'));
    const asPostgres = process.getuid?.() === 0;
    if (asPostgres) {
      const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
      const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
      chownSync(root, uid, gid);
    }
    const server = new PostgresServer(bin, join(root, 'data'), await freePort(), asPostgres);
    t.teardown(async () => {
      await server.stop();
      rmSync(root, { recursive: true, force: true });
    });
    server.run('initdb', ['-D', server.dir, '-U', 'postgres', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
    await server.resume();
    return server;
  }

  /** Starts the server (again) on its port and waits until it accepts connections. */
  async resume(): Promise<void> {
    // -k: the socket in its own folder, not /var/run/postgresql; fsync off: a test's data.
    this.run('pg_ctl', ['-D', this.dir, '-l', join(this.dir, 'server.log'), '-w', '-t', '60', '-o', `-h 127.0.0.1 -p ${this.port} -k ${this.dir} -c fsync=off`, 'start']);
    const pid = Number(readFileSync(join(this.dir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    this.pid = pid;
    this.forget = onEmergencyExit(() => process.kill(pid, 'SIGKILL'));
  }

  /** Stops the server by its postmaster's pid (SIGINT: fast shutdown, clients disconnected) and waits for it to exit. */
  async stop(): Promise<void> {
    const pid = this.pid;
    if (pid === null) return;
    this.pid = null;
    try {
      process.kill(pid, 'SIGINT');
    } catch {
      // already gone
    }
    await until(() => !isAlive(pid), `PostgreSQL (pid ${pid}) to stop`, { timeoutMs: 60_000, intervalMs: 100 });
    this.forget();
  }

  /** The server's own log, for a failing test's message. */
  log(): string {
    return readFileSync(join(this.dir, 'server.log'), 'utf8');
  }

  private run(tool: string, args: string[]): void {
    const path = join(this.bin, tool);
    const [command, argv] = this.asPostgres ? ['runuser', ['-u', 'postgres', '--', path, ...args]] : [path, args];
    try {
      execFileSync(command, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], cwd: tmpdir() });
    } catch (err) {
      const e = err as { stdout?: string; stderr?: string; message: string };
      throw new Error(`${tool} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`, { cause: err });
    }
  }
}

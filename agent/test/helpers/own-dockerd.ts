import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import type { Test } from 'tap';
import { waitFor } from './docker.js';

/** Why this machine cannot run a dockerd of a test's own, or null when it can (root, `dockerd` and `unshare` on PATH). */
export function ownDockerdUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'a dockerd of its own needs root';
  if (spawnSync('dockerd', ['--version'], { encoding: 'utf8' }).status !== 0) return 'no dockerd on PATH';
  if (spawnSync('unshare', ['--net', 'true'], { encoding: 'utf8' }).status !== 0) return 'no network namespace of its own (unshare --net)';
  return null;
}

export interface OwnDockerd {
  /** Its API socket. */
  socket: string;
  client: Docker;
  /** Starts it (again) and resolves once it answers. */
  start(): Promise<void>;
  /** SIGTERM to its pid; resolves once it exited. */
  stop(): Promise<void>;
  /** Everything it logged. */
  log(): string;
}

/**
 * A second Docker daemon, the test's own: in a network namespace of its own (`unshare --net`),
 * with its socket, data root, exec root, pid file and containerd namespaces in a temporary
 * folder, no bridge, no iptables and an empty config file, so it touches nothing of the
 * machine's dockerd (never restarted by a test: other tests use it). The network namespace is
 * not optional: a dockerd started with `--bridge none` deletes the host's `docker0` at start
 * (moby's `removeDefaultBridgeInterface`), the shared daemon's default bridge. `unshare` execs
 * dockerd in place, so its pid is dockerd's: stopped by it at teardown, its folder removed.
 */
export async function ownDockerd(t: Test): Promise<OwnDockerd> {
  const dir = mkdtempSync(join(tmpdir(), 'gf-own-dockerd-'));
  const socket = join(dir, 'docker.sock');
  const config = join(dir, 'daemon.json');
  writeFileSync(config, '{}\n');
  const namespace = `gf-test-${randomBytes(4).toString('hex')}`;
  const args = [
    '--host', `unix://${socket}`,
    '--data-root', join(dir, 'data'),
    '--exec-root', join(dir, 'exec'),
    '--pidfile', join(dir, 'docker.pid'),
    '--config-file', config,
    '--containerd-namespace', namespace,
    '--containerd-plugins-namespace', `${namespace}-plugins`,
    '--storage-driver', 'vfs',
    '--bridge', 'none',
    '--iptables=false',
    '--ip-forward=false',
    '--ip-masq=false',
    '--userland-proxy=false',
  ];
  const logPath = join(dir, 'dockerd.log');
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();
  const client = new Docker({ socketPath: socket });
  const start = async () => {
    const out = openSync(logPath, 'a');
    const started = spawn('unshare', ['--net', 'dockerd', ...args], { stdio: ['ignore', out, out] });
    child = started;
    exited = new Promise<void>((resolve) => started.once('exit', () => resolve()));
    await waitFor(async () => {
      if (started.exitCode !== null) throw new Error(`dockerd exited with ${started.exitCode}: ${readFileSync(logPath, 'utf8').slice(-2000)}`);
      return client.ping().then(() => true, () => false);
    }, 60_000);
  };
  const stop = async () => {
    const running = child;
    if (running === null || running.exitCode !== null) return;
    running.kill('SIGTERM');
    await exited;
    child = null;
  };
  t.teardown(async () => {
    await stop();
    rmSync(dir, { recursive: true, force: true });
  });
  await start();
  return { socket, client, start, stop, log: () => readFileSync(logPath, 'utf8') };
}

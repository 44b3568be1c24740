import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { buildTestApp } from './helpers/app.js';
import { createPostgresTestDatabase } from './helpers/database.js';

const CANARY_DIGEST = `sha256:${'c'.repeat(64)}`;
const CANARY_IMAGE = `registry.example.com/gpufarm/canary@${CANARY_DIGEST}`;
const MAIN = new URL('../src/main.ts', import.meta.url).pathname;

t.test('GET /v1 advertises the canary image (name and digest) and how to run it', async (t) => {
  const { app } = await buildTestApp(t, { env: { GF_CANARY_IMAGE: CANARY_IMAGE } });
  t.same((await app.inject({ url: '/v1' })).json().canary, {
    image: CANARY_IMAGE,
    repository: 'registry.example.com/gpufarm/canary',
    digest: CANARY_DIGEST,
    command: ['sha256-chain', '<iterations>'],
  });
});

t.test('GET /v1 says canary: null on a deployment without one', async (t) => {
  const { app } = await buildTestApp(t);
  const body = (await app.inject({ url: '/v1' })).json();
  t.ok('canary' in body);
  t.equal(body.canary, null);
});

/** Starts `control-plane/src/main.ts` on any free port; resolves with its URL and everything it printed until it listened. */
async function startProcess(t: Test, env: Record<string, string>): Promise<{ url: string; output: () => string }> {
  const { url: databaseUrl } = await createPostgresTestDatabase(t);
  const dataDir = mkdtempSync(join(tmpdir(), 'gf-index-canary-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN], {
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', DATABASE_URL: databaseUrl!, GF_DATA_DIR: dataDir, GF_LOG_LEVEL: 'info', GF_CANARY_IMAGE: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    child.on('message', (message: { type?: string; url?: string }) => {
      if (message.type === 'listening' && message.url) resolve(message.url);
    });
    void exited.then(() => reject(new Error(`the control plane exited before it listened:\n${output}`)));
  });
  return { url, output: () => output };
}

t.test('behavior: a deployment without GF_CANARY_IMAGE says at start what it cannot do', async (t) => {
  const { url, output } = await startProcess(t, {});
  const warning = output().split('\n').filter((line) => line.includes('GF_CANARY_IMAGE is not set'));
  t.equal(warning.length, 1, 'one line at start');
  const logged = JSON.parse(warning[0]!) as { level: number; msg: string };
  t.equal(logged.level, 40, 'a warning');
  t.match(logged.msg, /no job reaches RESULT_VERIFIED, as the service recomputes the result of its canary image only \(machines are still verified by the GPU challenge\)/);
  t.equal(((await (await fetch(`${url}/v1`)).json()) as { canary: unknown }).canary, null);
});

t.test('behavior: a deployment with a canary image logs no such line', async (t) => {
  const { url, output } = await startProcess(t, { GF_CANARY_IMAGE: CANARY_IMAGE });
  t.notMatch(output(), /GF_CANARY_IMAGE is not set/);
  t.match(((await (await fetch(`${url}/v1`)).json()) as { canary: unknown }).canary, { image: CANARY_IMAGE });
});

import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { openPostgres } from '@gpufarm/control-plane/db';
import { agentLinksByServer } from '@gpufarm/scripts/cluster/haproxy';
import { releaseMounts } from './helpers/agent.js';
import { freePort } from '@gpufarm/shared/node';
import { freePortBlock, ROOT, TEST_DATABASE_URL } from './helpers/marketplace.js';
import { isAlive, spawnProcess } from './helpers/processes.js';
import { until } from './helpers/wait.js';

/**
 * `npm run cluster` (scripts/src/cluster.ts) as a user runs it, on a database and a data folder
 * of its own: it prints every URL, each part answers there, both agents hold a link through
 * HAProxy, each process logs to its file, and a Ctrl-C (SIGINT) stops every process it started.
 */

t.setTimeout(300_000);
const run = promisify(execFile);

t.test('default: npm run cluster starts PostgreSQL\'s database, the chain, s3rver, Redis, three replicas, HAProxy and two agents, and SIGINT stops them all', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'gf-cluster-'));
  const database = `gf_cluster_${randomBytes(5).toString('hex')}`;
  // Ten ports from one base: HAProxy, the three replicas and the stats page at +9.
  const base = await freePortBlock(10);
  const cluster = spawnProcess('npm-run-cluster', process.execPath, ['--import', 'tsx', join(ROOT, 'scripts/src/cluster.ts')], {
    cwd: ROOT,
    env: { GF_DATA_DIR: dataDir, GF_CLUSTER_PORT: String(base), GF_CLUSTER_DATABASE: database, GF_CLUSTER_POSTGRES_URL: TEST_DATABASE_URL, GF_ADMIN_TOKEN: '', GF_LOCAL_AGENT: '', GF_LOCAL_AGENT_GPUS: '', GF_CANARY_IMAGE: '' },
  });
  t.teardown(async () => {
    await cluster.stop(20_000);
    for (const machineId of cluster.output().matchAll(/machine (mach_\w+)/g)) {
      const { stdout } = await run('docker', ['ps', '-aq', '--filter', `label=org.gpufarm.owner=${machineId[1]}`]).catch(() => ({ stdout: '' }));
      const ids = stdout.split('\n').filter(Boolean);
      if (ids.length) await run('docker', ['rm', '-fv', ...ids]).catch(() => undefined);
    }
    const admin = openPostgres(TEST_DATABASE_URL, { max: 1 });
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).finally(() => admin.close());
    // An agent stopped while its canary ran leaves the job's /output mounted (to resume it).
    await releaseMounts(dataDir);
    rmSync(dataDir, { recursive: true, force: true });
  });
  await cluster.waitForOutput(/Stop everything with Ctrl-C/, 'the banner', 240_000);
  const banner = cluster.output();

  const url = (label: string) => new RegExp(`${label}\\s+(http://127\\.0\\.0\\.1:\\d+)`).exec(banner)?.[1];
  const front = url('API \\(HAProxy\\)');
  t.equal(front, `http://127.0.0.1:${base}`, 'HAProxy on GF_CLUSTER_PORT');
  const replicas = ['cp1', 'cp2', 'cp3'].map((name) => url(`replica ${name}`));
  t.same(replicas, [1, 2, 3].map((i) => `http://127.0.0.1:${base + i}`), 'three replicas on the next ports');
  for (const target of [front, ...replicas]) t.equal((await fetch(`${target}/v1`)).status, 200, `${target}/v1 answers`);
  const s3 = url('S3 \\(s3rver\\)');
  t.ok(s3, 'the S3 endpoint is printed');
  t.ok((await fetch(s3!).then((r) => r.status)) < 500, 's3rver answers');
  t.match(banner, /Redis\s+redis:\/\/127\.0\.0\.1:\d+\s+\(the replicas' shared rate limits, pid \d+\)/, 'the Redis of the shared limits is printed');
  // One client address calling each replica in turn: the three count down one shared bucket.
  const window = Number((await fetch(`${replicas[0]}/v1/pricing`)).headers.get('x-ratelimit-reset'));
  if (window < 5) await new Promise((resolve) => setTimeout(resolve, (window + 1) * 1000));
  const remaining: number[] = [];
  for (const replica of replicas) remaining.push(Number((await fetch(`${replica}/v1/pricing`)).headers.get('x-ratelimit-remaining')));
  t.same(remaining, [remaining[0]!, remaining[0]! - 1, remaining[0]! - 2], 'a call to each replica counts down one shared limit');
  const stats = /HAProxy stats\s+(\S+)/.exec(banner)?.[1];
  const links = await until(
    async () => {
      const held = [...(await agentLinksByServer(stats!)).values()].reduce((a, b) => a + b, 0);
      return held === 2 ? held : undefined;
    },
    'two agent links through HAProxy',
    { timeoutMs: 30_000 },
  );
  t.equal(links, 2, 'both agents hold a link through HAProxy');
  t.equal((banner.match(/agent-\d\s+machine mach_/g) ?? []).length, 2, 'two agents enrolled');

  const logDir = join(dataDir, 'cluster', 'logs');
  for (const name of ['cp1', 'cp2', 'cp3', 'agent-1', 'agent-2', 's3rver', 'redis']) t.ok(existsSync(join(logDir, `${name}.log`)), `${name} logs to ${name}.log`);
  t.match(readFileSync(join(logDir, 'agent-1.log'), 'utf8'), / link up: /, "the agent's log says its link is up");

  const pids = [...banner.matchAll(/pid (\d+)/g)].map((m) => Number(m[1]));
  t.ok(pids.length >= 8, `the banner names the pids (${pids.join(', ')})`);
  t.ok(pids.every(isAlive));
  process.kill(cluster.pid, 'SIGINT');
  t.equal(await cluster.exited, 0, 'npm run cluster ends with 0 after Ctrl-C');
  await until(() => pids.every((pid) => !isAlive(pid)), 'every process it started to be gone', { timeoutMs: 5_000 }).catch(() => undefined);
  t.same(
    pids.filter((pid) => isAlive(pid)),
    [],
    'no process it started is left',
  );
});

t.test('error: PostgreSQL not answering: npm run cluster says what to run and starts nothing', async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), 'gf-cluster-nopg-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const port = await freePort();
  const cluster = spawnProcess('npm-run-cluster', process.execPath, ['--import', 'tsx', join(ROOT, 'scripts/src/cluster.ts')], {
    cwd: ROOT,
    env: { GF_DATA_DIR: dataDir, GF_CLUSTER_POSTGRES_URL: `postgres://gpufarm:gpufarm@127.0.0.1:${port}/postgres` },
  });
  t.teardown(() => cluster.stop());
  t.equal(await cluster.exited, 1);
  t.match(cluster.output(), /PostgreSQL does not answer at postgres:\/\/gpufarm:…@127\.0\.0\.1:\d+\/postgres/);
  t.match(cluster.output(), /bash scripts\/test-env\.sh/, 'names the command that prepares it');
  t.notOk(existsSync(join(dataDir, 'cluster', 'haproxy.cfg')), 'nothing was started');
});

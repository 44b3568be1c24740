import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createApiKey, keyEnvironmentFor } from '@gpufarm/control-plane/auth';
import { loadConfig } from '@gpufarm/control-plane/config';
import { openPostgres } from '@gpufarm/control-plane/db';
import { createBenchDatabase } from './database.js';
import { startControlPlaneProcess } from './server.js';
import type { StandaloneSection } from './standalone.js';
import { median } from './report.js';

/** Size of the artifact and measured runs of each path (after one warm-up of each). */
const BYTES = Number(process.env.BENCH_DOWNLOAD_MIB ?? 512) * 1024 * 1024;
const RUNS = Number(process.env.BENCH_DOWNLOAD_RUNS ?? 5);
/** Target: the signed URL gives at least this share of reading the stored file. */
const TARGET_RATIO = 0.8;

const load = () => loadavg().map((x) => x.toFixed(2)).join(' ');

/**
 * A Node customer in its own process. Prints `<sha256> <seconds>`, timed inside (Node's start-up
 * excluded). Modes:
 * - `http URL KEY`: `GET /v1/artifacts/:id` (the 302), then the signed URL with `node:http`,
 *   hashing as the bytes arrive; `stream FILE`: the stored file through a 1 MiB read stream;
 * - `socket URL KEY`: the 302 with `node:http`, then the signed URL read from its socket into one
 *   reused 1 MiB buffer (`onread`), the status line and headers parsed, the body hashed and its
 *   length checked against Content-Length; `read FILE`: the stored file read into one reused
 *   1 MiB buffer (synchronous reads) and hashed. Same reader, same hasher: only the source differs.
 */
const NODE_CLIENT = `
const { createHash } = require('node:crypto');
const http = require('node:http');
const net = require('node:net');
const fs = require('node:fs');
const [mode, what, key] = process.argv.slice(1);
const started = process.hrtime.bigint();
const hash = createHash('sha256');
const fail = (m) => { console.error(m); process.exit(1); };
const done = () => console.log(hash.digest('hex') + ' ' + Number(process.hrtime.bigint() - started) / 1e9);
const get = (url, headers, then) => http.get(url, { headers }, then).on('error', (e) => fail(e.message));
const signedUrl = (then) => get(what, { authorization: 'Bearer ' + key }, (redirect) => {
  redirect.resume();
  if (redirect.statusCode !== 302) fail('status ' + redirect.statusCode);
  then(new URL(redirect.headers.location, what));
});
const buffer = Buffer.allocUnsafe(1 << 20);
if (mode === 'http') {
  signedUrl((url) => get(url, {}, (res) => {
    if (res.statusCode !== 200) fail('status ' + res.statusCode);
    res.on('data', (c) => hash.update(c)).on('end', done);
  }));
} else if (mode === 'socket') {
  signedUrl((url) => {
    let head = Buffer.alloc(0);
    let length = -1;
    let body = 0;
    const socket = net.connect({ host: url.hostname, port: Number(url.port), onread: { buffer, callback: (n, b) => {
      let chunk = b.subarray(0, n);
      if (length < 0) {
        head = Buffer.concat([head, chunk]);
        const end = head.indexOf('\\r\\n\\r\\n');
        if (end < 0) return;
        const text = head.subarray(0, end).toString('latin1');
        if (!/^HTTP\\/1\\.1 200 /.test(text)) fail(text.split('\\r\\n')[0]);
        length = Number(/\\r\\ncontent-length: *(\\d+)/i.exec(text)?.[1] ?? NaN);
        if (!Number.isSafeInteger(length)) fail('no Content-Length');
        chunk = head.subarray(end + 4);
      }
      body += chunk.length;
      hash.update(chunk);
    } } }, () => socket.write('GET ' + url.pathname + url.search + ' HTTP/1.1\\r\\nHost: ' + url.host + '\\r\\nConnection: close\\r\\n\\r\\n'));
    socket.on('error', (e) => fail(e.message)).on('end', () => (body === length ? done() : fail('body ' + body + ' bytes, Content-Length ' + length)));
  });
} else if (mode === 'stream') {
  fs.createReadStream(what, { highWaterMark: 1 << 20 }).on('data', (c) => hash.update(c)).on('end', done);
} else {
  const fd = fs.openSync(what, 'r');
  for (let n; (n = fs.readSync(fd, buffer, 0, buffer.length, null)) > 0; ) hash.update(buffer.subarray(0, n));
  done();
}
`;

/** User plus system CPU seconds a process used so far (`/proc/<pid>/stat`, 100 ticks a second). */
function cpuSecondsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

interface Measured {
  seconds: number;
  sha256: string;
}

/** Runs `command args` and resolves with its stdout; throws with its stderr on a non-zero exit. */
function runChild(command: string, args: string[]): Promise<{ stdout: string; seconds: number }> {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.once('error', reject);
    child.once('exit', (code) => {
      const seconds = Number(process.hrtime.bigint() - started) / 1e9;
      if (code === 0) resolve({ stdout, seconds });
      else reject(new Error(`${command} ${args.join(' ')} exited ${String(code)}: ${stderr.trim().slice(-400)}`));
    });
  });
}

/** A shell pipeline, timed from its start to its exit; its output's first word is the SHA-256 (or nothing). */
async function shell(script: string): Promise<Measured> {
  const { stdout, seconds } = await runChild('sh', ['-c', script]);
  return { seconds, sha256: /([0-9a-f]{64})/.exec(stdout)?.[1] ?? '' };
}

async function nodeClient(mode: 'http' | 'socket' | 'stream' | 'read', what: string, key = ''): Promise<Measured> {
  const { stdout } = await runChild(process.execPath, ['-e', NODE_CLIENT, mode, what, key]);
  const [sha256 = '', seconds = 'NaN'] = stdout.trim().split(' ');
  return { sha256, seconds: Number(seconds) };
}

/** Streams `bytes` random bytes to `POST /v1/artifacts`; resolves with the artifact's id and SHA-256. */
async function upload(baseUrl: string, key: string, bytes: number): Promise<{ id: string; sha256: string }> {
  const chunk = randomBytes(1024 * 1024);
  let sent = 0;
  const body = Readable.from(
    (function* () {
      while (sent < bytes) {
        const n = Math.min(chunk.length, bytes - sent);
        // Different bytes per MiB (its number in the first eight), so nothing repeats.
        chunk.writeBigUInt64BE(BigInt(sent), 0);
        sent += n;
        yield Buffer.from(chunk.subarray(0, n));
      }
    })(),
  );
  return new Promise((resolve, reject) => {
    const req = request(`${baseUrl}/v1/artifacts?filename=bench.bin`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream', 'content-length': String(bytes) },
    });
    req.once('response', (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => {
        if (res.statusCode !== 201) return reject(new Error(`POST /v1/artifacts answered ${res.statusCode}: ${text.slice(0, 300)}`));
        const body = JSON.parse(text) as { id: string; sha256: string };
        resolve({ id: body.id, sha256: body.sha256 });
      });
    });
    req.once('error', reject);
    pipeline(body, req).catch(reject);
  });
}

interface Pair {
  label: string;
  route: () => Promise<Measured>;
  file: () => Promise<Measured>;
  target: boolean;
}

/**
 * Artifact download through the signed URL against reading the stored file: a
 * control plane of its own (fresh database, `GF_ARTIFACT_DIR` in a temporary folder), an input
 * of `BENCH_DOWNLOAD_MIB` (512) MiB of random bytes uploaded with `POST /v1/artifacts`, then
 * each consumer in its own process, route and file alternating, `BENCH_DOWNLOAD_RUNS` (5) runs
 * after one warm-up of each, medians compared. The route's side starts with `GET
 * /v1/artifacts/:id` (the 302) and follows the signed URL; the file's side reads the stored
 * file (`<GF_ARTIFACT_DIR>/<sha[0:2]>/<sha>`). Every hash is checked against the artifact's.
 * - the target's row: the same reader and hasher on both sides (one reused 1 MiB buffer, Node's
 *   SHA-256), from the signed URL's socket or from the file: only the source differs. The other
 *   rows' clients read a socket slower than a file (fresh 64 KiB buffers per read, a pipe
 *   more), so their ratio measures the client as much as the route: with the same reader the
 *   route keeps up with the file, and a sendfile server tried beside it did no better on them;
 * - curl piped to `openssl dgst -sha256` (SHA-NI, about 1 GiB/s here) against cat piped to it;
 * - a Node client (`node:http`, hashing as bytes arrive) against a 1 MiB read stream and hash;
 * - coreutils `sha256sum` (no SHA-NI, about 300 MiB/s: both sides are bound by the hash);
 * - bytes only: `curl -o /dev/null` against `cat > /dev/null` (no hash; what HTTP over
 *   loopback costs beside a page-cache read).
 * Target: at least 0.8 of the file's throughput on the target's row.
 */
export const artifactDownloadSection: StandaloneSection = {
  name: 'artifact download',
  run: async (log) => {
    const serverUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://gpufarm:gpufarm@127.0.0.1:5432/postgres';
    const database = await createBenchDatabase(serverUrl);
    const artifactDir = await mkdtemp(join(tmpdir(), 'gf-bench-artifacts-'));
    let server: Awaited<ReturnType<typeof startControlPlaneProcess>> | null = null;
    try {
      server = await startControlPlaneProcess({ databaseUrl: database.url, readyPath: '/v1', env: { GF_ARTIFACT_DIR: artifactDir, GF_MAX_INPUT_BYTES: String(BYTES) } });
      const db = openPostgres(database.url, { max: 1 });
      let key: string;
      try {
        const environment = keyEnvironmentFor(loadConfig(process.env).environment);
        key = (await createApiKey(db, { walletAddress: `0x${randomBytes(20).toString('hex')}`, scopes: ['jobs:create', 'artifacts:read'], environment, label: 'bench' })).key;
      } finally {
        await db.close();
      }
      const uploadStarted = performance.now();
      const artifact = await upload(server.url, key, BYTES);
      const stored = join(artifactDir, artifact.sha256.slice(0, 2), artifact.sha256);
      log(`uploaded ${BYTES / 1024 / 1024} MiB as ${artifact.id} in ${((performance.now() - uploadStarted) / 1000).toFixed(1)} s; stored at ${stored}; control plane pid ${server.pid}`);
      const api = `${server.url}/v1/artifacts/${artifact.id}`;
      const auth = `Authorization: Bearer ${key}`;
      const pairs: Pair[] = [
        {
          label: 'verified, same reader and hasher: one reused 1 MiB buffer + SHA-256, the signed URL\'s socket (baseline: the stored file, synchronous reads)',
          route: () => nodeClient('socket', api, key),
          file: () => nodeClient('read', stored),
          target: true,
        },
        {
          label: 'verified, same hasher and pipe: curl -L (302, signed URL) | openssl dgst -sha256 (baseline: cat FILE | openssl dgst -sha256)',
          route: () => shell(`curl -sSfL -H '${auth}' '${api}' | openssl dgst -sha256 -r`),
          file: () => shell(`cat '${stored}' | openssl dgst -sha256 -r`),
          target: false,
        },
        {
          label: 'verified, Node streams: node:http + createHash (baseline: 1 MiB read stream + createHash)',
          route: () => nodeClient('http', api, key),
          file: () => nodeClient('stream', stored),
          target: false,
        },
        {
          label: 'verified, coreutils: curl -L | sha256sum (baseline: sha256sum FILE)',
          route: () => shell(`curl -sSfL -H '${auth}' '${api}' | sha256sum`),
          file: () => shell(`sha256sum '${stored}'`),
          target: false,
        },
        {
          label: 'bytes only: curl -L -o /dev/null (baseline: cat FILE > /dev/null)',
          route: () => shell(`curl -sSfL -H '${auth}' -o /dev/null '${api}'`),
          file: () => shell(`cat '${stored}' > /dev/null`),
          target: false,
        },
      ];

      const rows: string[][] = [];
      const missed: string[] = [];
      for (const pair of pairs) {
        const route: number[] = [];
        const file: number[] = [];
        let serverCpuSeconds = 0;
        for (let i = 0; i <= RUNS; i++) {
          const cpuBefore = cpuSecondsOf(server.pid);
          const r = await pair.route();
          if (i > 0) serverCpuSeconds += cpuSecondsOf(server.pid) - cpuBefore;
          const f = await pair.file();
          for (const m of [r, f]) if (m.sha256 !== '' && m.sha256 !== artifact.sha256) throw new Error(`${pair.label}: SHA-256 ${m.sha256}, expected ${artifact.sha256}`);
          if (i === 0) continue; // warm-up
          route.push(BYTES / 1024 / 1024 / r.seconds);
          file.push(BYTES / 1024 / 1024 / f.seconds);
        }
        const ratio = median(route) / median(file);
        const each = route.map((r, i) => (r / file[i]!).toFixed(2)).join(' ');
        log(`${pair.label}: route ${route.map((x) => x.toFixed(0)).join(' ')} MiB/s; file ${file.map((x) => x.toFixed(0)).join(' ')} MiB/s; ratio per run ${each}; server CPU ${((serverCpuSeconds * 1024 ** 3) / (RUNS * BYTES)).toFixed(2)} s per GiB sent; load ${load()}`);
        const pass = ratio >= TARGET_RATIO;
        if (pair.target && !pass) missed.push(`artifact download: ${ratio.toFixed(2)} of reading the stored file (target >= ${TARGET_RATIO})`);
        rows.push([pair.label, median(route).toFixed(0), median(file).toFixed(0), ratio.toFixed(2), pair.target ? `>= ${TARGET_RATIO}` : '-', pair.target ? (pass ? 'PASS' : 'FAIL') : '']);
      }
      const header = ['path (MiB/s, median of runs)', 'route', 'file', 'ratio', 'target', 'result'];
      const all = [header, ...rows];
      const widths = header.map((_, i) => Math.max(...all.map((r) => r[i]!.length)));
      const render = (r: string[]) => r.map((c, i) => (i >= 1 && i <= 3 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ').trimEnd();
      const table = [render(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(render)];
      table.push(`${RUNS} runs of ${BYTES / 1024 / 1024} MiB per path, alternating with the baseline, after one warm-up; every client in its own process; load average ${load()}`);
      return { table, missed };
    } finally {
      await server?.stop();
      await rm(artifactDir, { recursive: true, force: true });
      await database.drop();
    }
  },
};

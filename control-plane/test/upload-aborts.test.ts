import { randomBytes } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import t from 'tap';
import { createTestKey } from './helpers/app.js';
import { uploadPath, uploadSetup, type ArtifactSetup, type Upload } from './helpers/uploads.js';

/**
 * Uploads cut off by the client at every moment, through real sockets reset with SO_LINGER 0
 * (`resetAndDestroy`): the server stays up, keeps no temp file and no artifact row.
 */

const TIMES = 50;
/** How long the server may take to notice a reset and remove its temp file. */
const SETTLE_MS = 5_000;

type Moment = 'with the request head' | 'after a few KiB' | 'mid-body, once bytes are stored' | 'in the trailer';
const MOMENTS: Moment[] = ['with the request head', 'after a few KiB', 'mid-body, once bytes are stored', 'in the trailer'];

interface Target {
  name: string;
  method: 'POST' | 'PUT';
  path: string;
  authorization: () => Promise<string>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function tmpFiles(s: ArtifactSetup): string[] {
  try {
    return readdirSync(join(s.dir, 'tmp'));
  } catch {
    return [];
  }
}

/** Waits until `check` holds, for at most `ms`; answers whether it did. */
async function eventually(check: () => boolean, ms = SETTLE_MS): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await sleep(5);
  }
  return true;
}

const chunk = (bytes: Buffer) => Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from('\r\n')]);

/** Sends a chunked upload on a raw socket and resets the connection at `moment`. */
async function abortAt(s: ArtifactSetup & Upload, target: Target, moment: Moment): Promise<void> {
  const socket = net.connect({ host: '127.0.0.1', port: s.port });
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  const head = Buffer.from(
    `${target.method} ${target.path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${await target.authorization()}\r\n` +
      'Content-Type: application/octet-stream\r\nTransfer-Encoding: chunked\r\nTrailer: X-Content-Sha256\r\n\r\n',
  );
  const write = (bytes: Buffer) => new Promise<void>((resolve) => socket.write(bytes, () => resolve()));
  switch (moment) {
    case 'with the request head':
      await write(head);
      break;
    case 'after a few KiB':
      await write(Buffer.concat([head, chunk(randomBytes(4 * 1024))]));
      break;
    case 'mid-body, once bytes are stored': {
      await write(Buffer.concat([head, chunk(randomBytes(64 * 1024))]));
      const stored = await eventually(() => tmpFiles(s).some((f) => (statSync(join(s.dir, 'tmp', f), { throwIfNoEntry: false })?.size ?? 0) > 0));
      if (!stored) throw new Error('the server stored no byte of the body within 5 s');
      break;
    }
    case 'in the trailer':
      await write(Buffer.concat([head, chunk(randomBytes(8 * 1024)), Buffer.from('0\r\nX-Content-Sha256: 00ab')]));
      break;
  }
  socket.resetAndDestroy();
}

t.test('behavior: uploads reset at any moment leave the server up, no temp file and no artifact row', async (t) => {
  const s = await uploadSetup(t, 'running', [{ path: '/output', maxBytes: 1024 * 1024 }]);
  const targets: Target[] = [
    // A key per upload: input uploads have a bucket of 30 a minute per key.
    { name: 'POST /v1/artifacts', method: 'POST', path: '/v1/artifacts', authorization: async () => `Bearer ${(await createTestKey(s.db)).key}` },
    { name: 'agent output PUT', method: 'PUT', path: uploadPath(s, 'output-0'), authorization: async () => `Bearer ${s.token}` },
    { name: 'agent log PUT', method: 'PUT', path: uploadPath(s, 'log'), authorization: async () => `Bearer ${s.token}` },
  ];
  for (const target of targets) {
    for (const moment of MOMENTS) {
      let leftBehind = 0;
      for (let i = 0; i < TIMES; i++) {
        await abortAt(s, target, moment);
        if (!(await eventually(() => tmpFiles(s).length === 0))) {
          leftBehind++;
          break;
        }
      }
      const label = `${target.name}, reset ${moment}, ${TIMES} times`;
      t.equal(leftBehind, 0, `${label}: no temp file behind`);
      const [rows] = await s.db.query<{ n: number }>('SELECT count(*)::int AS n FROM artifacts');
      t.equal(rows!.n, 0, `${label}: no artifact row`);
      const index = await fetch(`http://127.0.0.1:${s.port}/v1`);
      t.equal(index.status, 200, `${label}: GET /v1 answers`);
    }
  }
});

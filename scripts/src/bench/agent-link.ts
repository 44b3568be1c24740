import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocket, WebSocketServer } from 'ws';
import { AGENT_PROTOCOL_VERSION, agentMessageSchema } from '@gpufarm/shared';
import { AgentDaemon, InventoryMonitor, nvidiaSmiReader, parseSimulatedGpus, rejectingRunner, silentLog, systemHostReader } from '@gpufarm/agent';
import type { StandaloneResult, StandaloneSection } from './standalone.js';

/**
 * Log throughput through the agent's link: one chatty producer writes LINES lines (about 80
 * bytes each) into an assignment's log sink; the link batches them (every 100 ms or 64 KiB),
 * numbers them, and a local peer validates every message with the protocol's zod schemas,
 * stores each line once and acks each batch. Timed from the first write to the last ack.
 *
 * Baseline, in the same run: the same line bytes sent over a raw WebSocket in 64 KiB frames
 * with no numbering, validation or acks, timed until the server has received them all.
 * Target: at least 50,000 lines per second through the link.
 */
const LINES = Number(process.env.BENCH_LOG_LINES ?? 300_000);
const TARGET_LINES_PER_SECOND = 50_000;

const lineText = (i: number) => `${new Date(1_700_000_000_000 + i).toISOString()} step ${i} loss=${(1 / (1 + i)).toFixed(6)} lr=0.0003 ok`;

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A protocol peer: validates, stores (assignment, seq) once, acks each batch. */
async function startPeer(token: string) {
  const server = createServer((_req, res) => res.writeHead(404).end());
  const wss = new WebSocketServer({ server, maxPayload: 16 * 1024 * 1024 });
  let stored = -1;
  let onStored: (() => void) | null = null;
  wss.on('connection', (ws, req) => {
    if (req.headers.authorization !== `Bearer ${token}`) return ws.close(4401, 'unauthorized');
    ws.on('message', (data) => {
      const msg = agentMessageSchema.parse(JSON.parse(data.toString()));
      if (msg.type === 'hello') {
        ws.send(JSON.stringify({ type: 'welcome', protocolVersion: AGENT_PROTOCOL_VERSION, supportedVersions: [AGENT_PROTOCOL_VERSION], machineId: 'm_bench', heartbeatIntervalSeconds: 10, serverTime: new Date().toISOString(), acked: [] }));
      } else if (msg.type === 'logs') {
        for (const line of msg.lines) if (line.seq === stored + 1) stored = line.seq;
        ws.send(JSON.stringify({ type: 'logs.ack', assignmentId: msg.assignmentId, seq: stored }));
        onStored?.();
      }
    });
  });
  const address = await listen(server);
  return {
    url: `http://${address}`,
    stored: () => stored,
    waitFor: (seq: number) => new Promise<void>((resolve) => {
      onStored = () => {
        if (stored >= seq) resolve();
      };
      onStored();
    }),
    close: async () => {
      for (const c of wss.clients) c.terminate();
      await new Promise<void>((r) => wss.close(() => r()));
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}

async function throughLink(): Promise<{ seconds: number; bytes: number }> {
  const token = `gfa_${'b'.repeat(43)}`;
  const peer = await startPeer(token);
  const stateDir = mkdtempSync(join(tmpdir(), 'gf-bench-link-'));
  const daemon = new AgentDaemon(
    {
      inventory: new InventoryMonitor(
        { gpus: nvidiaSmiReader(), host: systemHostReader(stateDir), probe: null, now: () => new Date() },
        { agentVersion: 'bench', simulate: parseSimulatedGpus('1x rtx-4090-24gb'), hostRefreshMs: 60_000, probeIntervalMs: 600_000, probeRetryMs: 600_000 },
      ),
      runner: rejectingRunner(),
      benchmark: () => null,
      log: silentLog,
    },
    { server: peer.url, machineToken: token, agentVersion: 'bench', spoolDir: join(stateDir, 'spool'), logMemoryBytes: 8 * 1024 * 1024, heartbeatIntervalSeconds: 10, inventoryIntervalSeconds: 60, reconnect: { initialMs: 50, maxMs: 500 } },
  );
  try {
    await daemon.start();
    while (!daemon.link.ready) await new Promise((r) => setTimeout(r, 5));
    const sink = daemon.logs.open('asg_bench');
    let bytes = 0;
    const started = performance.now();
    for (let i = 0; i < LINES; ) {
      const end = Math.min(LINES, i + 2000);
      for (; i < end; i++) {
        const text = lineText(i);
        bytes += text.length + 1;
        sink.write(i % 10 === 0 ? 'stderr' : 'stdout', text);
      }
      await new Promise((r) => setImmediate(r));
    }
    await peer.waitFor(LINES - 1);
    return { seconds: (performance.now() - started) / 1000, bytes };
  } finally {
    await daemon.stop();
    await peer.close();
    rmSync(stateDir, { recursive: true, force: true });
  }
}

async function rawWebSocket(): Promise<{ seconds: number; bytes: number }> {
  const server = createServer();
  const wss = new WebSocketServer({ server, maxPayload: 16 * 1024 * 1024 });
  let received = 0;
  let total = Infinity;
  let done: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => { done = resolve; });
  wss.on('connection', (ws) => ws.on('message', (data: Buffer) => {
    received += data.length;
    if (received >= total) done();
  }));
  const address = await listen(server);
  const ws = new WebSocket(`ws://${address}`);
  await new Promise((r) => ws.once('open', r));
  try {
    const started = performance.now();
    let frame: string[] = [];
    let frameBytes = 0;
    let bytes = 0;
    for (let i = 0; i < LINES; ) {
      const end = Math.min(LINES, i + 2000);
      for (; i < end; i++) {
        const text = `${lineText(i)}\n`;
        frame.push(text);
        frameBytes += text.length;
        if (frameBytes >= 64 * 1024) {
          ws.send(frame.join(''));
          bytes += frameBytes;
          frame = [];
          frameBytes = 0;
        }
      }
      await new Promise((r) => setImmediate(r));
    }
    if (frameBytes > 0) ws.send(frame.join(''));
    bytes += frameBytes;
    total = bytes;
    if (received >= total) done();
    await finished;
    return { seconds: (performance.now() - started) / 1000, bytes };
  } finally {
    ws.terminate();
    for (const c of wss.clients) c.terminate();
    await new Promise<void>((r) => wss.close(() => r()));
    await new Promise<void>((r) => server.close(() => r()));
  }
}

async function run(log: (line: string) => void): Promise<StandaloneResult> {
  log(`${LINES} lines of about ${lineText(LINES / 2).length} bytes, one producer, peer in the same process`);
  const baseline = await rawWebSocket();
  const link = await throughLink();
  const rate = (r: { seconds: number }) => LINES / r.seconds;
  const mbps = (r: { seconds: number; bytes: number }) => r.bytes / 1e6 / r.seconds;
  const rows = [
    ['path', 'lines/s', 'MB/s of text', 'seconds', 'ratio', 'target', 'result'],
    ['raw ws send, 64 KiB frames, no seq/acks/validation', rate(baseline).toFixed(0), mbps(baseline).toFixed(1), baseline.seconds.toFixed(2), '1.000', 'baseline', ''],
    ['agent link: batched 100 ms / 64 KiB, seq, zod, acked', rate(link).toFixed(0), mbps(link).toFixed(1), link.seconds.toFixed(2), (rate(link) / rate(baseline)).toFixed(3), `>= ${TARGET_LINES_PER_SECOND} lines/s`, rate(link) >= TARGET_LINES_PER_SECOND ? 'PASS' : 'FAIL'],
  ];
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  const table = rows.map((r, n) => r.map((c, i) => (i >= 1 && i <= 4 && n > 0 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ').trimEnd());
  table.splice(1, 0, widths.map((w) => '-'.repeat(w)).join('  '));
  return { table, missed: rate(link) >= TARGET_LINES_PER_SECOND ? [] : [`agent log link ${rate(link).toFixed(0)} lines/s < ${TARGET_LINES_PER_SECOND}`] };
}

export const agentLinkSection: StandaloneSection = { name: 'agent log link', run };

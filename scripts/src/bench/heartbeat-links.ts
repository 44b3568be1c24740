import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { WebSocket } from 'ws';
import type { GpuHealthReport } from '@gpufarm/shared';
import { gpuHealthReport } from '@gpufarm/shared/testing/gpu-reports';
import { exited } from './server.js';

/**
 * Agent links for the fleet bench's heartbeat ingest, and its baseline: a bare `ws` server that
 * only JSON-parses the same heartbeats, fed by links of its own. Those links run in a process of
 * their own (this file run as `--bare-links PORT`), so that both sets fit one process's file
 * limit and the two servers are measured over the same seconds.
 */

export const HEARTBEAT_SECONDS = 10;
/** The scripts workspace, whose node_modules resolve `ws` and `tsx` for the baseline's processes. */
const SCRIPTS_DIR = fileURLToPath(new URL('../../', import.meta.url));

export interface Link {
  ws: WebSocket;
  gpus: Array<{ index: number; uuid: string }>;
  timer: NodeJS.Timeout | null;
  /** Whether the GPU health reports went out (a protocol 4 agent sends them in its first heartbeat, then on change). */
  reportedHealth: boolean;
}

/** A healthy GPU's health report, as an agent reads it from nvidia-smi; slowdown at 90 °C and shutdown at 95 °C, above every temperature the links send. */
function healthyReport(gpu: { index: number; uuid: string }): GpuHealthReport {
  return gpuHealthReport({ index: gpu.index, uuid: gpu.uuid, slowdownTempC: 90, shutdownTempC: 95 });
}

function heartbeatOf(link: Link): string {
  const gpuHealth = link.reportedHealth ? {} : { gpuHealth: link.gpus.map(healthyReport) };
  link.reportedHealth = true;
  return JSON.stringify({
    ...gpuHealth,
    type: 'heartbeat',
    sentAt: new Date().toISOString(),
    health: { status: 'healthy', reason: null, gpuProbe: 'simulated', checkedAt: new Date().toISOString() },
    gpus: link.gpus.map((g) => ({ index: g.index, uuid: g.uuid, temperatureC: 40 + Math.round(Math.random() * 40), utilizationPercent: Math.round(Math.random() * 100), memoryUsedBytes: Math.round(Math.random() * 2 ** 34), powerDrawWatts: 100 + Math.round(Math.random() * 300) })),
    inventory: null,
    runningAssignmentIds: [],
    draining: false,
  });
}

/** A heartbeat every HEARTBEAT_SECONDS, the first at a random point of the first interval so the links spread out. */
export function startBeating(link: Link): void {
  link.timer = setTimeout(() => {
    link.timer = setInterval(() => link.ws.readyState === WebSocket.OPEN && link.ws.send(heartbeatOf(link)), HEARTBEAT_SECONDS * 1000);
    link.ws.send(heartbeatOf(link));
  }, Math.random() * HEARTBEAT_SECONDS * 1000);
}

/** Stops the links' heartbeats and drops their connections. */
export function stopLinks(links: readonly Link[]): void {
  for (const link of links) {
    if (link.timer) clearInterval(link.timer);
    link.ws.terminate();
  }
}

/** Opens a link to the bare server for each entry of `gpusPerLink` (50 at a time), each beating as an agent's would. */
async function openBareLinks(port: number, gpusPerLink: ReadonlyArray<Link['gpus']>): Promise<Link[]> {
  const links: Link[] = [];
  for (let i = 0; i < gpusPerLink.length; i += 50) {
    await Promise.all(
      gpusPerLink.slice(i, i + 50).map(async (gpus) => {
        const ws = new WebSocket(`ws://127.0.0.1:${port}/`);
        await new Promise<void>((resolve, reject) => {
          ws.once('open', () => resolve());
          ws.once('error', reject);
        });
        ws.on('error', () => {});
        const link: Link = { ws, gpus, timer: null, reportedHealth: false };
        startBeating(link);
        links.push(link);
      }),
    );
  }
  return links;
}

/** The first line `child` prints, or the reason it printed none. */
function firstLine(child: ReturnType<typeof spawn>, what: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once('line', resolve);
    child.once('error', reject);
    child.once('exit', (code, signal) => reject(new Error(`${what} exited (${code ?? signal}) before it was ready`)));
  });
}

export interface BareBaseline {
  /** The bare server's pid, whose CPU is the baseline. */
  pid: number;
  /** Whether the server and its links' process still run. */
  alive(): boolean;
  stop(): void;
}

/**
 * The bare `ws` server (its own process) and, in another, one beating link to it for each entry
 * of `gpusPerLink`; resolves once every link is open.
 */
export async function startBareBaseline(gpusPerLink: ReadonlyArray<Link['gpus']>): Promise<BareBaseline> {
  const server = spawn(
    process.execPath,
    ['--input-type=module', '-e', `import { WebSocketServer } from 'ws';
const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', maxPayload: 1 << 20 });
wss.on('connection', (ws) => ws.on('message', (data) => JSON.parse(data.toString())));
wss.on('listening', () => console.log(wss.address().port));`],
    { cwd: SCRIPTS_DIR, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  let driver: ReturnType<typeof spawn> | null = null;
  const stop = () => {
    driver?.kill();
    server.kill();
  };
  try {
    const port = Number(await firstLine(server, 'the bare ws server'));
    const links = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--bare-links', String(port)], { cwd: SCRIPTS_DIR, stdio: ['pipe', 'pipe', 'inherit'] });
    driver = links;
    // A driver that died at once fails its pipe: `firstLine` reports the exit instead.
    links.stdin!.on('error', () => undefined);
    links.stdin!.end(JSON.stringify(gpusPerLink));
    await firstLine(links, "the bare server's links");
    return { pid: server.pid!, alive: () => !exited(server) && !exited(links), stop };
  } catch (err) {
    stop();
    throw err;
  }
}

// Run as the bare server's links: the GPUs of each link on stdin (JSON), a line on stdout once all are open.
if (process.argv[1] === fileURLToPath(import.meta.url) && process.argv[2] === '--bare-links') {
  const port = Number(process.argv[3]);
  let input = '';
  process.stdin.setEncoding('utf8');
  for await (const chunk of process.stdin) input += chunk;
  const links = await openBareLinks(port, JSON.parse(input) as Array<Link['gpus']>);
  console.log(`${links.length} links open`);
}

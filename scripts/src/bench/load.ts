import autocannon from 'autocannon';
import { startCpuMeter, type CpuSubjects } from './cpu.js';

/** Anonymous calls are limited to 60 a minute per address: each address makes at most this many. */
const CALLS_PER_ADDRESS = 50;
let calls = 0;

/** The next client address (in 10.0.0.0/8 and up), each handed out CALLS_PER_ADDRESS times. */
function nextClientAddress(): string {
  const n = Math.floor(calls++ / CALLS_PER_ADDRESS);
  return `${10 + ((n >>> 24) & 0x7f)}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
}

export interface LoadOptions {
  baseUrl: string;
  path: string;
  connections: number;
  durationSeconds: number;
  warmupSeconds: number;
  /** Whose CPU time is counted. */
  cpu: CpuSubjects;
  /** Sent with every request besides the client address (a bearer token, say). */
  headers?: Record<string, string>;
}

export interface LoadResult {
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** Response counts per status code. */
  statusCodes: Record<string, number>;
  bytesPerSecond: number;
  /** CPU microseconds the control plane spent per request. */
  serverCpuUsPerRequest: number;
  /** CPU microseconds PostgreSQL spent per request. */
  postgresCpuUsPerRequest: number;
}

function run(options: LoadOptions, seconds: number): Promise<autocannon.Result> {
  return autocannon({
    url: `${options.baseUrl}${options.path}`,
    connections: options.connections,
    duration: seconds,
    requests: [
      {
        method: 'GET',
        path: options.path,
        setupRequest: (request) => ({ ...request, headers: { ...request.headers, ...options.headers, 'x-forwarded-for': nextClientAddress() } }),
      },
    ],
  });
}

/** Warms the endpoint up, then measures it with autocannon; every call from a fresh enough address. */
export async function measure(options: LoadOptions): Promise<LoadResult> {
  if (options.warmupSeconds > 0) await run(options, options.warmupSeconds);
  return measureCpu(options.cpu, () => run(options, options.durationSeconds));
}

/** Runs one autocannon measurement while counting the CPU time of the server and of PostgreSQL. */
export async function measureCpu(subjects: CpuSubjects, load: () => Promise<autocannon.Result>): Promise<LoadResult> {
  const cpuSince = startCpuMeter(subjects);
  const result = await load();
  const cpu = cpuSince();
  const perRequest = (seconds: number) => (result.requests.total > 0 ? (seconds * 1e6) / result.requests.total : 0);
  return { ...toLoadResult(result), serverCpuUsPerRequest: perRequest(cpu.server), postgresCpuUsPerRequest: perRequest(cpu.postgres) };
}

/** An autocannon result as a table row's figures. */
function toLoadResult(result: autocannon.Result): Omit<LoadResult, 'serverCpuUsPerRequest' | 'postgresCpuUsPerRequest'> {
  const statusCodes: Record<string, number> = {};
  for (const [code, stat] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = stat.count ?? 0;
  return {
    requestsPerSecond: result.requests.average,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    requests: result.requests.total,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
    bytesPerSecond: result.throughput.average,
  };
}

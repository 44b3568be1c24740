import autocannon from 'autocannon';

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
        setupRequest: (request) => ({ ...request, headers: { ...request.headers, 'x-forwarded-for': nextClientAddress() } }),
      },
    ],
  });
}

/** Warms the endpoint up, then measures it with autocannon; every call from a fresh enough address. */
export async function measure(options: LoadOptions): Promise<LoadResult> {
  if (options.warmupSeconds > 0) await run(options, options.warmupSeconds);
  return toLoadResult(await run(options, options.durationSeconds));
}

/** An autocannon result as a table row's figures. */
export function toLoadResult(result: autocannon.Result): LoadResult {
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

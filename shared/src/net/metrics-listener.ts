import { createServer } from 'node:http';
import { errorText } from '../errors.js';

/**
 * How often prom-client's default metrics sample the event loop's delay
 * (`collectDefaultMetrics({ eventLoopMonitoringPrecision })`). Its default, 10 ms, is a timer
 * that wakes an idle process 200 times a second: half a percent of a core on a small VM, in
 * every control plane and on every farm machine, for a lag figure scraped every 15 s.
 */
export const EVENT_LOOP_SAMPLE_MS = 100;

/** The exposition to serve: Prometheus text and its content type (a prom-client registry gives both). */
export interface MetricsSource {
  readonly contentType: string;
  metrics(): Promise<string>;
}

/** A listener of its own for Prometheus: `GET /metrics` and nothing else, no credential (bind it to a private address). */
export interface MetricsListener {
  /** `http://host:port` as bound. */
  url: string;
  close(): Promise<void>;
}

/** Serves `source` on `host:port`; port 0 takes a free one. Rejects when the address cannot be bound (EADDRINUSE). */
export async function startMetricsListener(source: MetricsSource, address: { host: string; port: number }): Promise<MetricsListener> {
  const server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    if (path !== '/metrics' || (request.method !== 'GET' && request.method !== 'HEAD')) {
      response.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Only GET /metrics is served here.\n');
      return;
    }
    source.metrics().then(
      (text) => response.writeHead(200, { 'Content-Type': source.contentType, 'Cache-Control': 'no-store' }).end(request.method === 'HEAD' ? undefined : text),
      (err: unknown) => response.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' }).end(`metrics could not be collected: ${errorText(err)}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = server.address();
  const port = typeof bound === 'object' && bound ? bound.port : address.port;
  return {
    url: `http://${address.host.includes(':') ? `[${address.host}]` : address.host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

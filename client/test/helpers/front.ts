import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface Seen {
  method: string;
  url: string;
  idempotencyKey: string | undefined;
  at: number;
}

/**
 * A real HTTP server in front of the control plane that answers each request with the next
 * scripted step: a status of its own, or `forward` (the control plane's answer), or
 * `forward-then-503` (the control plane acts, and its answer is replaced by a 503, as when a
 * balancer loses it).
 */
export async function frontOf(t: Teardown, upstream: string, steps: Array<number | 'forward' | 'forward-then-503'>, headers: Record<string, string> = {}) {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, idempotencyKey: req.headers['idempotency-key'] as string | undefined, at: Date.now() });
      const step = steps.shift() ?? 'forward';
      if (typeof step === 'number') {
        res.writeHead(step, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify({ error: { code: step === 429 ? 'rate_limited' : 'unavailable', message: 'scripted', requestId: 'req_front', details: [] } }));
        return;
      }
      forward(upstream, req, Buffer.concat(chunks), res, step === 'forward-then-503');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  return { seen, baseUrl: `http://127.0.0.1:${(server.address() as { port: number }).port}` };
}

function forward(upstream: string, req: IncomingMessage, body: Buffer, res: ServerResponse, lose: boolean): void {
  const headers = { ...req.headers };
  delete headers.host;
  const out = httpRequest(`${upstream}${req.url}`, { method: req.method, headers }, (answer) => {
    const chunks: Buffer[] = [];
    answer.on('data', (c: Buffer) => chunks.push(c));
    answer.on('end', () => {
      if (lose) {
        res.writeHead(503, { 'content-type': 'text/plain' });
        res.end('upstream answer lost');
        return;
      }
      res.writeHead(answer.statusCode!, answer.headers);
      res.end(Buffer.concat(chunks));
    });
  });
  out.end(body);
}

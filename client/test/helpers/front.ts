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

type Step = number | 'forward' | 'forward-then-503' | 'forward-as-newer';

/** The field `forward-as-newer` adds to every JSON object of an answer. */
export const ADDED_FIELD = 'addedByANewerServer';

/**
 * A real HTTP server in front of the control plane that answers each request with the next
 * scripted step (`then` once they are used up): a status of its own, or `forward` (the control
 * plane's answer), or `forward-then-503` (the control plane acts, and its answer is replaced by a
 * 503, as when a balancer loses it), or `forward-as-newer` (the answer with a field the client's
 * schemas do not know added to every JSON object, in a JSON body or each event of a stream, as a
 * newer server could answer).
 */
export async function frontOf(t: Teardown, upstream: string, steps: Step[], headers: Record<string, string> = {}, then: Step = 'forward') {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, idempotencyKey: req.headers['idempotency-key'] as string | undefined, at: Date.now() });
      const step = steps.shift() ?? then;
      if (typeof step === 'number') {
        res.writeHead(step, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify({ error: { code: step === 429 ? 'rate_limited' : 'unavailable', message: 'scripted', requestId: 'req_front', details: [] } }));
        return;
      }
      forward(upstream, req, Buffer.concat(chunks), res, step);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  return { seen, baseUrl: `http://127.0.0.1:${(server.address() as { port: number }).port}` };
}

function withAddedFields(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withAddedFields);
  if (value === null || typeof value !== 'object') return value;
  return { ...Object.fromEntries(Object.entries(value).map(([name, field]) => [name, withAddedFields(field)])), [ADDED_FIELD]: { since: '2099-01-01' } };
}

/** The answer's body as a newer server could send it (see `forward-as-newer`). */
function asNewer(contentType: string | undefined, body: Buffer): Buffer {
  if (body.length === 0) return body;
  if (contentType?.startsWith('application/json')) return Buffer.from(JSON.stringify(withAddedFields(JSON.parse(body.toString('utf8')))));
  if (contentType?.startsWith('text/event-stream')) {
    return Buffer.from(body.toString('utf8').replace(/^data: (.*)$/gm, (_, data: string) => `data: ${JSON.stringify(withAddedFields(JSON.parse(data)))}`));
  }
  return body;
}

function forward(upstream: string, req: IncomingMessage, body: Buffer, res: ServerResponse, step: Exclude<Step, number>): void {
  const headers = { ...req.headers };
  delete headers.host;
  const out = httpRequest(`${upstream}${req.url}`, { method: req.method, headers }, (answer) => {
    const chunks: Buffer[] = [];
    answer.on('data', (c: Buffer) => chunks.push(c));
    answer.on('end', () => {
      if (step === 'forward-then-503') {
        res.writeHead(503, { 'content-type': 'text/plain' });
        res.end('upstream answer lost');
        return;
      }
      if (step === 'forward-as-newer') {
        const newer = asNewer(answer.headers['content-type'], Buffer.concat(chunks));
        const head = { ...answer.headers, 'content-length': String(newer.length) };
        delete head['transfer-encoding'];
        res.writeHead(answer.statusCode!, head);
        res.end(newer);
        return;
      }
      res.writeHead(answer.statusCode!, answer.headers);
      res.end(Buffer.concat(chunks));
    });
  });
  // The control plane unreachable: the client sees a gateway error, not a front that crashed the test.
  out.on('error', (err) => {
    if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
    res.end(`front: ${err.message}`);
  });
  out.end(body);
}

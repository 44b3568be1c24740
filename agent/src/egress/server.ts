import { createServer, type IncomingMessage, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { checkAnswers, decideTarget, REFUSAL_STATUS, type EgressPolicy, type EgressRefusal } from './decision.js';
import type { EgressEnd, EgressEvent } from './events.js';

/** Tunnels one job may hold open at once. */
export const DEFAULT_MAX_CONNECTIONS = 64;
/** Bytes (both directions, all tunnels) one job may move through the proxy in its life. */
export const DEFAULT_MAX_BYTES = 64 * 1024 ** 3;
/** Refusals written to the job's log; past this they are counted, not logged one by one. */
export const MAX_LOGGED_REFUSALS = 200;
export const CONNECT_TIMEOUT_MS = 10_000;
export const IDLE_TIMEOUT_MS = 5 * 60_000;

/** What one job's proxy enforces. */
export interface EgressProxyOptions {
  policy: EgressPolicy;
  /** The machine's own public networks (CIDRs): answers in them are refused like private ones. */
  ownNetworks?: readonly string[];
  maxConnections?: number;
  maxBytes?: number;
  connectTimeoutMs?: number;
  idleTimeoutMs?: number;
}

/** The proxy's ports: DNS and where decisions go. */
export interface EgressProxyDeps {
  /** Every address of a name (`dns.lookup` with `all: true` in the container). */
  lookup: (name: string) => Promise<string[]>;
  /** Receives each decision, in order. */
  emit: (event: EgressEvent) => void;
  /**
   * Test mode only (see `main.ts`): names answered with these addresses without DNS and without
   * the forbidden-range check, so tests can point allowlisted names at their own containers.
   * Every other name is resolved and checked as in production.
   */
  fixedHosts?: ReadonlyMap<string, string>;
}

export interface EgressProxy {
  server: Server;
  /** Tunnels open now. */
  readonly open: number;
  /** Bytes moved so far, both directions. */
  readonly bytes: number;
  /** Stops accepting and ends every tunnel. */
  close(): Promise<void>;
}

/**
 * An HTTP proxy that only opens `CONNECT host:port` tunnels the job's policy allows: the name
 * exactly on the allowlist, a public name, an allowed port, every resolved address public; it
 * connects to an address it checked. Any other method is refused (405): clients reach plain
 * HTTP through `CONNECT host:80` as well. Call `server.listen` to start it.
 */
export function createEgressProxy(options: EgressProxyOptions, deps: EgressProxyDeps): EgressProxy {
  const maxConnections = options.maxConnections ?? DEFAULT_MAX_CONNECTIONS;
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  const connectTimeoutMs = options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
  const idleTimeoutMs = options.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
  let open = 0;
  let bytes = 0;
  let nextId = 1;
  let refusals = 0;
  const tunnels = new Set<(why: EgressEnd) => void>();

  const refuse = (socket: Duplex, name: string, port: number | null, reason: EgressRefusal, detail: string) => {
    refusals++;
    if (refusals <= MAX_LOGGED_REFUSALS) deps.emit({ egress: 'refused', name, port, reason, detail });
    else if (refusals === MAX_LOGGED_REFUSALS + 1) deps.emit({ egress: 'note', message: `more than ${MAX_LOGGED_REFUSALS} refusals: further ones are not logged` });
    const status = REFUSAL_STATUS[reason];
    const body = `${reason}: ${detail}\n`;
    socket.end(`HTTP/1.1 ${status} ${statusText(status)}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  };

  const handleConnect = async (req: IncomingMessage, client: Duplex, head: Buffer) => {
    client.on('error', () => undefined);
    const decision = decideTarget(req.url ?? '', options.policy);
    if (!decision.allowed) return refuse(client, decision.name, decision.port, decision.reason, decision.detail);
    const { name, port } = decision;
    if (bytes >= maxBytes) return refuse(client, name, port, 'bytes', `the job moved its ${maxBytes} bytes`);
    if (open >= maxConnections) return refuse(client, name, port, 'connections', `the job holds ${maxConnections} tunnels already`);
    open++;
    let released = false;
    const release = () => {
      if (!released) open--;
      released = true;
    };
    try {
      let addresses: string[];
      const fixed = deps.fixedHosts?.get(name);
      if (fixed !== undefined) {
        addresses = [fixed];
      } else {
        let answers: string[];
        try {
          answers = await deps.lookup(name);
        } catch (err) {
          release();
          return refuse(client, name, port, 'no_answer', `resolving the name failed (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
        }
        const checked = checkAnswers(answers, options.ownNetworks);
        if (!checked.allowed) {
          release();
          return refuse(client, name, port, checked.reason, checked.detail);
        }
        addresses = checked.addresses;
      }
      const upstream = await connectFirst(addresses, port, connectTimeoutMs);
      if (upstream === null) {
        release();
        return refuse(client, name, port, 'connect_failed', `no answer from ${addresses.join(', ')} on port ${port}`);
      }
      if (client.destroyed) {
        upstream.socket.destroy();
        release();
        return;
      }
      tunnel(client, head, upstream.socket, upstream.address, name, port, release);
    } catch (err) {
      release();
      refuse(client, name, port, 'connect_failed', (err as Error).message);
    }
  };

  const tunnel = (client: Duplex, head: Buffer, upstream: Socket, address: string, name: string, port: number, release: () => void) => {
    const id = nextId++;
    let bytesOut = 0;
    let bytesIn = 0;
    let endedBy: EgressEnd | undefined;
    deps.emit({ egress: 'allowed', id, name, port, address });
    const end = (why?: EgressEnd) => {
      endedBy ??= why;
      client.destroy();
      upstream.destroy();
    };
    const stop = (why: EgressEnd) => end(why);
    tunnels.add(stop);
    const count = (n: number): boolean => {
      bytes += n;
      if (bytes > maxBytes) {
        end('bytes');
        return false;
      }
      return true;
    };
    let closed = 0;
    const onClose = () => {
      if (++closed < 2) return;
      tunnels.delete(stop);
      release();
      deps.emit({ egress: 'closed', id, name, port, address, bytesOut, bytesIn, ...(endedBy ? { endedBy } : {}) });
    };
    client.on('close', onClose);
    upstream.on('close', onClose);
    upstream.on('error', () => end('error'));
    client.on('error', () => end('error'));
    // The CONNECT socket is a net.Socket; the type says Duplex.
    (client as Socket).setTimeout(idleTimeoutMs, () => end('idle'));
    upstream.setTimeout(idleTimeoutMs, () => end('idle'));
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) {
      bytesOut += head.length;
      if (count(head.length)) upstream.write(head);
    }
    relay(client, upstream, (n) => {
      bytesOut += n;
      return count(n);
    });
    relay(upstream, client, (n) => {
      bytesIn += n;
      return count(n);
    });
  };

  const server = createServer((req, res) => {
    let name = req.headers.host ?? '';
    let port: number | null = null;
    try {
      const url = new URL(req.url ?? '');
      name = url.hostname;
      port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
    } catch {
      // An origin-form request: the proxy is not a web server.
    }
    res.socket?.on('error', () => undefined);
    refuse(res.socket ?? req.socket, name.slice(0, 255), port, 'method', `only CONNECT is proxied, not ${req.method ?? '?'} (use CONNECT ${name || 'host'}:${port ?? 80})`);
  });
  server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => void handleConnect(req, socket, head));
  server.on('clientError', (_err, socket) => socket.destroy());
  // Sockets past this are dropped at accept: waiting CONNECTs count too, not only tunnels.
  server.maxConnections = maxConnections * 2 + 16;

  return {
    server,
    get open() {
      return open;
    },
    get bytes() {
      return bytes;
    },
    close: async () => {
      for (const stop of [...tunnels]) stop('shutdown');
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Copies `from` into `to` with backpressure; `count` false stops the copy (budget spent). */
function relay(from: Duplex, to: Duplex, count: (n: number) => boolean): void {
  from.on('data', (chunk: Buffer) => {
    if (!count(chunk.length)) return;
    if (!to.write(chunk)) from.pause();
  });
  to.on('drain', () => from.resume());
  from.on('end', () => to.end());
}

/** Connects to the first address that answers, in order; null when none does in time. */
async function connectFirst(addresses: readonly string[], port: number, timeoutMs: number): Promise<{ socket: Socket; address: string } | null> {
  for (const address of addresses) {
    const socket = await new Promise<Socket | null>((resolve) => {
      const s = connect({ host: address, port });
      const timer = setTimeout(() => {
        s.destroy();
        resolve(null);
      }, timeoutMs);
      s.once('connect', () => {
        clearTimeout(timer);
        resolve(s);
      });
      s.once('error', () => {
        clearTimeout(timer);
        resolve(null);
      });
    });
    if (socket) return { socket, address };
  }
  return null;
}

function statusText(status: number): string {
  return { 400: 'Bad Request', 403: 'Forbidden', 405: 'Method Not Allowed', 429: 'Too Many Requests', 502: 'Bad Gateway' }[status] ?? 'Error';
}

/** The port a listening proxy took (tests listen on port 0). */
export function proxyPort(proxy: EgressProxy): number {
  return (proxy.server.address() as AddressInfo).port;
}

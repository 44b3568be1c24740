import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy between one agent and the control plane that can partition them the way a broken
 * network does: `partition()` stops moving bytes either way without closing anything (the
 * sockets stay open, unread bytes wait in the kernel's buffers, as packets do in TCP
 * retransmission), and new connections are accepted but not forwarded; `heal()` lets every
 * byte through again, in order. A socket closed by the proxy would be a link drop, which the
 * agent notices at once; a partition is noticed only by silence.
 */
export class TcpProxy {
  private readonly pairs = new Set<{ client: Socket; upstream: Socket | null }>();
  private partitioned = false;
  private waiting: Array<() => void> = [];

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  /** Listens on a free port of 127.0.0.1 and forwards to `target` (`http://127.0.0.1:PORT`). */
  static async start(target: string): Promise<TcpProxy> {
    const { hostname, port } = new URL(target);
    let proxy: TcpProxy | null = null;
    const server = createServer((client) => proxy!.accept(client, hostname, Number(port)));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (typeof address !== 'object' || !address) throw new Error('the proxy has no port');
    proxy = new TcpProxy(server, `http://127.0.0.1:${address.port}`);
    return proxy;
  }

  private accept(client: Socket, host: string, port: number): void {
    const pair: { client: Socket; upstream: Socket | null } = { client, upstream: null };
    this.pairs.add(pair);
    client.pause();
    const end = () => {
      this.pairs.delete(pair);
      client.destroy();
      pair.upstream?.destroy();
    };
    client.on('error', end).on('close', end);
    const connect = () => {
      if (client.destroyed) return;
      const upstream = createConnection({ host, port });
      pair.upstream = upstream;
      upstream.on('error', end).on('close', end);
      forward(client, upstream, () => this.partitioned);
      forward(upstream, client, () => this.partitioned);
    };
    if (this.partitioned) this.waiting.push(connect);
    else connect();
  }

  /** Stops forwarding in both directions; nothing is closed. */
  partition(): void {
    this.partitioned = true;
    for (const { client, upstream } of this.pairs) {
      client.pause();
      upstream?.pause();
    }
  }

  /** Forwards again: bytes held meanwhile go through in order, waiting connections are made. */
  heal(): void {
    this.partitioned = false;
    for (const { client, upstream } of this.pairs) {
      if (upstream) {
        client.resume();
        upstream.resume();
      }
    }
    for (const connect of this.waiting.splice(0)) connect();
  }

  /** Open connections (each an agent's socket and its upstream). */
  get connections(): number {
    return this.pairs.size;
  }

  /**
   * A link drop: resets every open connection at the TCP level (RST both ways, unsent bytes
   * discarded), as a router that lost its state does. Returns how many connections were reset.
   */
  drop(): number {
    const pairs = [...this.pairs];
    for (const pair of pairs) {
      this.pairs.delete(pair);
      pair.client.resetAndDestroy();
      pair.upstream?.resetAndDestroy();
    }
    return pairs.length;
  }

  async close(): Promise<void> {
    for (const { client, upstream } of this.pairs) {
      client.destroy();
      upstream?.destroy();
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Copies `from` into `to` with backpressure; reading stays paused while `held()` is true. */
function forward(from: Socket, to: Socket, held: () => boolean): void {
  from.on('data', (chunk) => {
    if (!to.write(chunk)) from.pause();
  });
  to.on('drain', () => {
    if (!held()) from.resume();
  });
  from.on('end', () => to.end());
  if (!held()) from.resume();
}

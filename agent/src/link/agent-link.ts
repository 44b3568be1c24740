import WebSocket from 'ws';
import {
  AGENT_CLOSE_CODES,
  AGENT_WS_PATH,
  errorText,
  serverMessageSchema,
  type AgentMessage,
  type HelloMessage,
  type ServerMessage,
  type WelcomeMessage,
} from '@gpufarm/shared';
import { backoffDelay } from './backoff.js';

export type LinkState = 'idle' | 'connecting' | 'hello' | 'ready' | 'waiting' | 'stopped' | 'refused';

export interface AgentLinkOptions {
  /** Control-plane base URL (http/https); the socket goes to `AGENT_WS_PATH` on it (ws/wss). */
  server: string;
  machineToken: string;
  /** Built fresh for each connection (inventory, benchmark, running assignments). */
  hello: () => Promise<HelloMessage>;
  /** Called after each `welcome`, before any queued message is sent. */
  onWelcome: (welcome: WelcomeMessage) => void;
  /** Every other valid server message. */
  onMessage: (message: ServerMessage) => void;
  /** The link went down (it reconnects by itself unless refused). */
  onDown?: (reason: string) => void;
  /** The server refused the machine for good (bad token, no common protocol version). */
  onRefused?: (reason: string) => void;
  /** A message that failed its schema; it is dropped. */
  onInvalid?: (problem: string) => void;
  reconnect: { initialMs: number; maxMs: number };
  /**
   * The pong of a `ping()` arrived: everything sent on the socket before `sentAtMs` (that
   * ping's `performance.now()`) reached the control plane.
   */
  onDelivered?: (sentAtMs: number) => void;
  /** Ping period; a link silent for three of them is dropped and reconnected. */
  pingIntervalMs?: number;
  random?: () => number;
}

/** The WebSocket URL of a control plane: `https://cp` -> `wss://cp/agent/v1/ws`. */
export function linkUrl(server: string): string {
  const url = new URL(AGENT_WS_PATH, server.endsWith('/') ? server : `${server}/`);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  url.pathname = AGENT_WS_PATH;
  return url.toString();
}

/**
 * The agent's one WebSocket to the control plane. It connects with the machine token in the
 * `Authorization` header, sends `hello`, waits for `welcome`, then passes every incoming message
 * through `serverMessageSchema` to `onMessage`. When the socket drops it reconnects with
 * exponential backoff and jitter, forever, unless the server refused the machine (close code
 * 4401 or 4426, or HTTP 401/403 on the upgrade).
 */
export class AgentLink {
  private ws: WebSocket | null = null;
  private stateValue: LinkState = 'idle';
  private attempt = 0;
  private retryTimer: NodeJS.Timeout | null = null;
  private pingTimer: NodeJS.Timeout | null = null;
  private lastHeard = 0;
  /** Send times of the current socket's unanswered `ping()`s, oldest first (pongs come in order); NaN for the keepalive's. */
  private pingsSentAt: number[] = [];
  private readonly random: () => number;
  private readonly pingIntervalMs: number;
  /** Connections that reached `welcome`. */
  connections = 0;

  constructor(private readonly options: AgentLinkOptions) {
    this.random = options.random ?? Math.random;
    this.pingIntervalMs = options.pingIntervalMs ?? 15_000;
  }

  get state(): LinkState {
    return this.stateValue;
  }

  /** True once `welcome` arrived on the current socket. */
  get ready(): boolean {
    return this.stateValue === 'ready';
  }

  get bufferedAmount(): number {
    return this.ws?.bufferedAmount ?? 0;
  }

  start(): void {
    if (this.stateValue !== 'idle') return;
    this.connect();
  }

  /** Sends a message on the welcomed socket; false when the link is not ready (the caller keeps it). */
  send(message: AgentMessage): boolean {
    if (!this.ready || this.ws === null || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(message));
    return true;
  }

  /**
   * Pings the welcomed socket now; its pong reports, through `onDelivered`, that what was sent
   * before it (a heartbeat) reached the control plane.
   */
  ping(): void {
    if (this.ready && this.ws) this.sendPing(this.ws, true);
  }

  /** Drops the current socket as if the network failed (tests, and a stuck link). */
  drop(): void {
    this.ws?.terminate();
  }

  async stop(): Promise<void> {
    this.stateValue = 'stopped';
    if (this.retryTimer) clearTimeout(this.retryTimer);
    this.clearPing();
    const ws = this.ws;
    this.ws = null;
    if (ws && ws.readyState !== WebSocket.CLOSED) {
      await new Promise<void>((resolve) => {
        ws.once('close', () => resolve());
        ws.close(1000, 'agent stopping');
        setTimeout(() => {
          ws.terminate();
          resolve();
        }, 2000).unref();
      });
    }
  }

  private connect(): void {
    if (this.stateValue === 'stopped' || this.stateValue === 'refused') return;
    this.stateValue = 'connecting';
    const ws = new WebSocket(linkUrl(this.options.server), {
      headers: { Authorization: `Bearer ${this.options.machineToken}` },
      handshakeTimeout: 15_000,
      maxPayload: 16 * 1024 * 1024,
    });
    this.ws = ws;
    this.pingsSentAt = [];
    let downReason = 'connection closed';

    ws.on('unexpected-response', (_req, res) => {
      const status = res.statusCode ?? 0;
      res.resume();
      if (status === 401 || status === 403) {
        this.refuse(`the control plane refused the machine token (HTTP ${status}): enroll again`);
        ws.terminate();
        return;
      }
      downReason = `upgrade answered HTTP ${status}`;
      ws.terminate();
    });
    ws.on('open', () => {
      this.stateValue = 'hello';
      this.lastHeard = Date.now();
      this.startPing(ws);
      this.options
        .hello()
        .then((hello) => {
          if (this.ws === ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(hello));
        })
        .catch((err: unknown) => {
          downReason = `could not build hello: ${errorText(err)}`;
          ws.terminate();
        });
    });
    ws.on('message', (data, isBinary) => {
      this.lastHeard = Date.now();
      if (isBinary) {
        this.options.onInvalid?.('binary frame');
        return;
      }
      let json: unknown;
      try {
        json = JSON.parse(data.toString());
      } catch {
        this.options.onInvalid?.('a frame that is not JSON');
        return;
      }
      const parsed = serverMessageSchema.safeParse(json);
      if (!parsed.success) {
        const type = (json as { type?: unknown } | null)?.type;
        const issue = parsed.error.issues[0];
        this.options.onInvalid?.(`message ${JSON.stringify(type)}: ${issue ? `${issue.path.join('.') || '(root)'}: ${issue.message}` : 'invalid'}`);
        return;
      }
      const message = parsed.data;
      if (message.type === 'welcome') {
        this.stateValue = 'ready';
        this.attempt = 0;
        this.connections++;
        this.options.onWelcome(message);
        return;
      }
      if (this.stateValue !== 'ready') {
        this.options.onInvalid?.(`message ${message.type} before welcome`);
        return;
      }
      this.options.onMessage(message);
    });
    ws.on('pong', () => {
      this.lastHeard = Date.now();
      const sentAt = this.ws === ws ? this.pingsSentAt.shift() : undefined;
      if (sentAt !== undefined && !Number.isNaN(sentAt)) this.options.onDelivered?.(sentAt);
    });
    ws.on('close', (code, reasonBuffer) => {
      const reason = reasonBuffer.toString();
      if (this.ws === ws) this.ws = null;
      this.clearPing();
      if (code === AGENT_CLOSE_CODES.unauthorized) this.refuse(`the control plane refused the machine token: ${reason || 'unauthorized'}; enroll again`);
      else if (code === AGENT_CLOSE_CODES.unsupportedVersion) this.refuse(`no protocol version in common with the control plane: ${reason}; upgrade the agent`);
      if (this.stateValue === 'stopped' || this.stateValue === 'refused') return;
      this.options.onDown?.(code === 1006 ? downReason : `closed ${code}${reason ? `: ${reason}` : ''}`);
      this.scheduleReconnect();
    });
    ws.on('error', (err) => {
      downReason = err.message;
    });
  }

  private refuse(reason: string): void {
    if (this.stateValue === 'refused' || this.stateValue === 'stopped') return;
    this.stateValue = 'refused';
    this.options.onRefused?.(reason);
  }

  private scheduleReconnect(): void {
    this.stateValue = 'waiting';
    const delay = backoffDelay(this.attempt++, this.options.reconnect, this.random);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.connect();
    }, delay);
  }

  private startPing(ws: WebSocket): void {
    this.clearPing();
    const openedAt = Date.now();
    this.pingTimer = setInterval(() => {
      // A server that answers pings but never says welcome is as useless as a silent one.
      const noWelcome = this.stateValue === 'hello' && Date.now() - openedAt > this.pingIntervalMs * 2;
      if (noWelcome || Date.now() - this.lastHeard > this.pingIntervalMs * 3) {
        ws.terminate();
        return;
      }
      this.sendPing(ws, false);
    }, this.pingIntervalMs);
  }

  /** `reported`: the pong goes to `onDelivered` (it follows a message the caller wants proof of). */
  private sendPing(ws: WebSocket, reported: boolean): void {
    if (ws.readyState !== WebSocket.OPEN) return;
    ws.ping();
    this.pingsSentAt.push(reported ? performance.now() : Number.NaN);
  }

  private clearPing(): void {
    if (this.pingTimer) clearInterval(this.pingTimer);
    this.pingTimer = null;
  }
}

import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';
import {
  AGENT_CLOSE_CODES,
  AGENT_ENROLL_PATH,
  AGENT_PROTOCOL_VERSIONS,
  AGENT_WS_PATH,
  agentMessageSchema,
  enrollRequestSchema,
  serverMessageSchema,
  type AgentMessage,
  type AssignmentSpec,
  type EnrollRequest,
  type LogBatchLine,
  type ServerMessage,
} from '@gpufarm/shared';

/**
 * A small control-plane stand-in for the agent's tests: HTTP enrollment, the WebSocket link and
 * the artifact uploads, speaking the protocol through the same zod schemas as the real server
 * will. It records every message, stores log lines as the server must (each (assignment, seq)
 * once, never with a gap; a line sent again must carry the same text), acks them, hashes each
 * upload while it reads it and compares with the agent's hash, and can drop sockets or go
 * offline to simulate a broken link or a partition.
 */

/** The header (or trailer) with the agent's SHA-256 of an upload's body. */
export const UPLOAD_SHA256_HEADER = 'x-content-sha256';
const UPLOAD_PATH = /^\/agent\/v1\/assignments\/([A-Za-z0-9_-]+)\/outputs\/([A-Za-z0-9_.-]+)$/;

/** One `PUT /agent/v1/assignments/:id/outputs/:name` the peer received. */
export interface PeerUpload {
  assignmentId: string;
  name: string;
  machineId: string;
  body: Buffer;
  /** SHA-256 the peer computed while reading the body. */
  sha256: string;
  /** What the agent declared (trailer, or header on a retry). */
  declaredSha256: string | null;
  /** The answer: 201 stored, 400 no hash declared, 422 the hashes differ. */
  status: number;
}
export interface PeerOptions {
  /** Enrollment tokens it accepts (each once). */
  enrollmentTokens?: string[];
  heartbeatIntervalSeconds?: number;
  /** `welcome.lostAfterSeconds` (protocol 2); absent by default, as from a server on protocol 1. */
  lostAfterSeconds?: number;
  /** Ack each logs batch (default true). */
  ackLogs?: boolean;
  /** The protocol versions this server speaks (default: all of this build's). */
  versions?: number[];
}

export class TestPeer {
  readonly server: Server;
  readonly wss: WebSocketServer;
  url = '';
  readonly machineTokens = new Map<string, string>();
  readonly enrollments: EnrollRequest[] = [];
  readonly received: AgentMessage[] = [];
  readonly invalid: string[] = [];
  /** Stored lines per assignment, in seq order. */
  readonly lines = new Map<string, LogBatchLine[]>();
  /** Lines that arrived again after they were stored (resends): harmless, counted. */
  resent = 0;
  /** Lines that arrived with a gap before them: must stay 0. */
  gaps = 0;
  sockets = new Set<WebSocket>();
  connections = 0;
  ackLogs: boolean;
  /** Called after a logs batch is stored and before it is acked (tests drop the link here). */
  onStored: ((assignmentId: string, storedLines: number) => void) | null = null;
  /** Tell the agent in `welcome` what is stored (default true); false makes it resend from its own last ack. */
  reportAcked = true;
  /** Lines sent again whose stream or text differs from the stored line of that seq: must stay empty. */
  readonly conflicts: string[] = [];
  /** Every upload received, in arrival order (stored or refused). */
  readonly uploads: PeerUpload[] = [];
  /** Uploads answered 503 while offline. */
  refusedWhileOffline = 0;
  /** Called as each upload request arrives, before it is answered (tests cut the link here). */
  onUpload: ((assignmentId: string, name: string) => void) | null = null;
  private offlineValue = false;
  private readonly tokens: Set<string>;
  private waiters: Array<{ check: () => boolean; resolve: () => void }> = [];

  constructor(private readonly options: PeerOptions = {}) {
    this.tokens = new Set(options.enrollmentTokens ?? []);
    this.ackLogs = options.ackLogs ?? true;
    this.server = createServer((req, res) => void this.http(req, res));
    this.wss = new WebSocketServer({ noServer: true, maxPayload: 16 * 1024 * 1024 });
    this.server.on('upgrade', (req, socket, head) => {
      if (this.offlineValue) {
        socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\r\n');
        return;
      }
      const auth = req.headers.authorization ?? '';
      const token = auth.startsWith('Bearer ') ? auth.slice(7) : '';
      const machineId = this.machineTokens.get(token);
      if (new URL(req.url ?? '/', 'http://x').pathname !== AGENT_WS_PATH || machineId === undefined) {
        socket.end('HTTP/1.1 401 Unauthorized\r\nConnection: close\r\n\r\n');
        return;
      }
      this.wss.handleUpgrade(req, socket, head, (ws) => this.onSocket(ws, machineId));
    });
  }

  static async start(options: PeerOptions = {}): Promise<TestPeer> {
    const peer = new TestPeer(options);
    await new Promise<void>((resolve) => peer.server.listen(0, '127.0.0.1', resolve));
    peer.url = `http://127.0.0.1:${(peer.server.address() as AddressInfo).port}`;
    return peer;
  }

  /** Registers a machine directly (tests that skip enrollment); returns its token. */
  addMachine(machineId = `m_${randomBytes(4).toString('hex')}`): { machineId: string; machineToken: string } {
    const machineToken = `gfa_${randomBytes(32).toString('base64url')}`;
    this.machineTokens.set(machineToken, machineId);
    return { machineId, machineToken };
  }

  /** Sends a server message to every connected agent (validated first). */
  send(message: ServerMessage): void {
    const text = JSON.stringify(serverMessageSchema.parse(message));
    for (const ws of this.sockets) ws.send(text);
  }

  /** Sends an assignment to every connected agent (validated by the `assign` schema). */
  assign(assignment: AssignmentSpec): void {
    this.send({ type: 'assign', assignment });
  }

  /** Drops every socket without a close handshake, as a broken network does. */
  dropAll(): void {
    for (const ws of this.sockets) ws.terminate();
  }

  /**
   * Offline: sockets are dropped, upgrades and uploads answered 503 (the control plane cannot
   * be reached) until `setOffline(false)`.
   */
  setOffline(offline: boolean): void {
    this.offlineValue = offline;
    if (offline) this.dropAll();
  }

  /** The last stored upload of each artifact of an assignment, by name. */
  storedUploads(assignmentId: string): Map<string, PeerUpload> {
    const out = new Map<string, PeerUpload>();
    for (const u of this.uploads) if (u.assignmentId === assignmentId && u.status === 201) out.set(u.name, u);
    return out;
  }

  /** Status messages of one assignment, in arrival order. */
  statuses(assignmentId: string): Array<Extract<AgentMessage, { type: 'assignment.status' }>> {
    return this.messages('assignment.status').filter((m) => m.assignmentId === assignmentId);
  }

  /** Resolves when `check()` holds (checked after each message and now). */
  waitFor(check: () => boolean, label = 'condition', timeoutMs = 30_000): Promise<void> {
    if (check()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`peer: timed out waiting for ${label}`)), timeoutMs);
      this.waiters.push({ check, resolve: () => { clearTimeout(timer); resolve(); } });
    });
  }

  messages<T extends AgentMessage['type']>(type: T): Array<Extract<AgentMessage, { type: T }>> {
    return this.received.filter((m): m is Extract<AgentMessage, { type: T }> => m.type === type);
  }

  async close(): Promise<void> {
    for (const ws of this.sockets) ws.terminate();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private notify(): void {
    this.waiters = this.waiters.filter((w) => {
      if (!w.check()) return true;
      w.resolve();
      return false;
    });
  }

  private async http(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.method === 'GET' && url.pathname === '/v1') return reply(200, { object: 'index' });
    const upload = UPLOAD_PATH.exec(url.pathname);
    if (req.method === 'PUT' && upload) return this.upload(req, upload[1]!, upload[2]!, reply);
    if (req.method === 'POST' && url.pathname === AGENT_ENROLL_PATH) {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      let json: unknown;
      try {
        json = JSON.parse(Buffer.concat(chunks).toString());
      } catch {
        return reply(400, { error: { code: 'invalid_json', message: 'not JSON', requestId: 'req_peer', details: [] } });
      }
      const parsed = enrollRequestSchema.safeParse(json);
      if (!parsed.success) return reply(400, { error: { code: 'invalid_request', message: parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '), requestId: 'req_peer', details: [] } });
      if (!this.tokens.delete(parsed.data.enrollmentToken)) return reply(401, { error: { code: 'forbidden', message: 'The enrollment token is unknown or was used.', requestId: 'req_peer', details: [] } });
      this.enrollments.push(parsed.data);
      const { machineId, machineToken } = this.addMachine();
      return reply(201, { machineId, machineToken, heartbeatIntervalSeconds: this.options.heartbeatIntervalSeconds ?? 10 });
    }
    reply(404, { error: { code: 'not_found', message: 'Not found.', requestId: 'req_peer', details: [] } });
  }

  /** Stores an upload: machine token required, body hashed as it is read, compared with the agent's hash. */
  private async upload(req: IncomingMessage, assignmentId: string, name: string, reply: (status: number, body: unknown) => void): Promise<void> {
    this.onUpload?.(assignmentId, name);
    if (this.offlineValue) {
      req.resume();
      this.refusedWhileOffline++;
      this.notify();
      return reply(503, { error: { code: 'unavailable', message: 'offline', requestId: 'req_peer', details: [] } });
    }
    const auth = req.headers.authorization ?? '';
    const machineId = this.machineTokens.get(auth.startsWith('Bearer ') ? auth.slice(7) : '');
    if (machineId === undefined) {
      req.resume();
      return reply(401, { error: { code: 'unauthorized', message: 'machine token required', requestId: 'req_peer', details: [] } });
    }
    const hash = createHash('sha256');
    const chunks: Buffer[] = [];
    for await (const c of req) {
      hash.update(c as Buffer);
      chunks.push(c as Buffer);
    }
    const sha256 = hash.digest('hex');
    const declared = req.trailers[UPLOAD_SHA256_HEADER] ?? (req.headers[UPLOAD_SHA256_HEADER] as string | undefined) ?? null;
    const status = declared === null ? 400 : declared === sha256 ? 201 : 422;
    this.uploads.push({ assignmentId, name, machineId, body: Buffer.concat(chunks), sha256, declaredSha256: declared, status });
    reply(status, status === 201 ? { sha256, sizeBytes: chunks.reduce((n, c) => n + c.length, 0) } : { error: { code: 'invalid_request', message: declared === null ? 'no X-Content-Sha256' : 'the body does not hash to X-Content-Sha256', requestId: 'req_peer', details: [] } });
    this.notify();
  }

  private onSocket(ws: WebSocket, machineId: string): void {
    this.sockets.add(ws);
    this.connections++;
    ws.on('close', () => this.sockets.delete(ws));
    /** The version this socket's `welcome` chose. */
    let chosen = 0;
    ws.on('message', (data) => {
      let parsed;
      try {
        parsed = agentMessageSchema.safeParse(JSON.parse(data.toString()));
      } catch {
        this.invalid.push('not JSON');
        ws.close(AGENT_CLOSE_CODES.invalidMessage, 'not JSON');
        return;
      }
      if (!parsed.success) {
        const problem = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
        this.invalid.push(problem);
        ws.close(AGENT_CLOSE_CODES.invalidMessage, problem.slice(0, 120));
        return;
      }
      const msg = parsed.data;
      // A server before protocol 4 has a strict heartbeat schema without `gpuHealth`.
      if (msg.type === 'heartbeat' && msg.gpuHealth !== undefined && chosen < 4) {
        this.invalid.push(`heartbeat: gpuHealth: unknown field on protocol ${chosen}`);
        ws.close(AGENT_CLOSE_CODES.invalidMessage, 'heartbeat: gpuHealth: unknown field');
        return;
      }
      // A server before protocol 5 has a strict status schema without `outputNotes`.
      if (msg.type === 'assignment.status' && msg.outputNotes !== undefined && chosen < 5) {
        this.invalid.push(`assignment.status: outputNotes: unknown field on protocol ${chosen}`);
        ws.close(AGENT_CLOSE_CODES.invalidMessage, 'assignment.status: outputNotes: unknown field');
        return;
      }
      // A server before protocol 6 knows neither a GPU report's persistence mode and fabric nor the code gpu_lost.
      const v6 = msg.type === 'heartbeat' ? msg.gpuHealth?.find((r) => 'persistenceMode' in r || 'fabric' in r) : undefined;
      if (chosen < 6 && (v6 !== undefined || (msg.type === 'assignment.status' && msg.failure?.code === 'gpu_lost'))) {
        const problem = v6 !== undefined ? 'heartbeat: gpuHealth: persistenceMode, fabric: unknown fields' : 'assignment.status: failure.code: gpu_lost unknown';
        this.invalid.push(`${problem} on protocol ${chosen}`);
        ws.close(AGENT_CLOSE_CODES.invalidMessage, problem);
        return;
      }
      // A server before protocol 8 knows neither `heartbeat.images` nor the reason image_cache_full.
      if (chosen < 8 && ((msg.type === 'heartbeat' && msg.images !== undefined) || (msg.type === 'assignment.rejected' && msg.reason === 'image_cache_full'))) {
        const problem = msg.type === 'heartbeat' ? 'heartbeat: images: unknown field' : 'assignment.rejected: reason: image_cache_full unknown';
        this.invalid.push(`${problem} on protocol ${chosen}`);
        ws.close(AGENT_CLOSE_CODES.invalidMessage, problem);
        return;
      }
      this.received.push(msg);
      if (msg.type === 'hello') {
        const versions: readonly number[] = this.options.versions ?? AGENT_PROTOCOL_VERSIONS;
        const common = msg.supportedVersions.filter((v) => versions.includes(v));
        if (common.length === 0) {
          ws.close(AGENT_CLOSE_CODES.unsupportedVersion, `server speaks ${versions.join(', ')}`);
          return;
        }
        chosen = Math.max(...common);
        ws.send(JSON.stringify(serverMessageSchema.parse({
          type: 'welcome',
          protocolVersion: chosen,
          supportedVersions: [...versions],
          machineId,
          heartbeatIntervalSeconds: this.options.heartbeatIntervalSeconds ?? 10,
          serverTime: new Date().toISOString(),
          acked: msg.running.map((r) => ({ assignmentId: r.assignmentId, seq: this.reportAcked ? this.lastSeq(r.assignmentId) : null })),
          ...(this.options.lostAfterSeconds ? { lostAfterSeconds: this.options.lostAfterSeconds } : {}),
        })));
      } else if (msg.type === 'logs') {
        const stored = this.lines.get(msg.assignmentId) ?? [];
        this.lines.set(msg.assignmentId, stored);
        for (const line of msg.lines) {
          const expected = stored.length === 0 ? 0 : stored[stored.length - 1]!.seq + 1;
          if (line.seq < expected) {
            this.resent++;
            const had = stored[line.seq];
            if (had && (had.stream !== line.stream || had.line !== line.line)) this.conflicts.push(`${msg.assignmentId} seq ${line.seq}: stored ${had.stream} ${JSON.stringify(had.line)}, sent again ${line.stream} ${JSON.stringify(line.line)}`);
          }
          else if (line.seq > expected) this.gaps++;
          else stored.push(line);
        }
        this.onStored?.(msg.assignmentId, stored.length);
        if (this.ackLogs && stored.length > 0 && ws.readyState === ws.OPEN) ws.send(JSON.stringify({ type: 'logs.ack', assignmentId: msg.assignmentId, seq: stored[stored.length - 1]!.seq }));
      }
      this.notify();
    });
  }

  private lastSeq(assignmentId: string): number | null {
    const stored = this.lines.get(assignmentId);
    return stored && stored.length > 0 ? stored[stored.length - 1]!.seq : null;
  }
}

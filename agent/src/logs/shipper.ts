import { MAX_LOG_BATCH_LINES, MAX_LOG_LINE_CHARS, type LogStream, type LogsMessage } from '@gpufarm/shared';
import { LogOutbox } from './outbox.js';

/** Where batches go: the link when it is up. */
export interface LogTransport {
  /** True once the link is connected and welcomed. */
  isReady(): boolean;
  send(message: LogsMessage): void;
  /** Bytes queued on the socket and not yet written; the shipper waits while it is high. */
  bufferedAmount(): number;
}

/**
 * One assignment's log output, as the runtime sees it. `write` numbers the line (per
 * assignment, from `firstSeq`) and returns its seq; lines longer than the protocol allows are
 * split. Writing never blocks and never fails while the link is down: lines wait in the outbox.
 */
export interface LogSink {
  readonly assignmentId: string;
  write(stream: LogStream, line: string, atMs?: number): number;
  /** The seq the next line will get. */
  readonly nextSeq: number;
  /** Resolves once the server acked every line written so far. */
  drained(): Promise<void>;
  /** Forgets the assignment (after `drained`, or when the control plane gave it up); removes its spill file. */
  release(): void;
}

export interface LogShipperOptions {
  spoolDir: string;
  /** Memory budget per assignment before lines spill to disk. */
  memoryBytes: number;
  /** A batch goes out at most this long after its first line (100 ms)… */
  flushIntervalMs?: number;
  /** …or as soon as this many bytes wait (64 KiB). */
  flushBytes?: number;
  /** While the socket holds more than this unsent, batches wait for it to drain. */
  maxSocketBufferBytes?: number;
  now?: () => number;
}

/**
 * Batches log lines from every assignment onto the link: by time (`flushIntervalMs`) and size
 * (`flushBytes`), one `logs` message per assignment and batch, kept in each assignment's
 * `LogOutbox` until `logs.ack` covers them and resent from the first unacked line after a
 * reconnect (`onReconnected`).
 */
export class LogShipper {
  private readonly outboxes = new Map<string, LogOutbox>();
  private readonly waiters = new Map<string, Array<() => void>>();
  private readonly flushIntervalMs: number;
  private readonly flushBytes: number;
  private readonly maxSocketBufferBytes: number;
  private readonly now: () => number;
  private pendingBytes = 0;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly transport: LogTransport, private readonly options: LogShipperOptions) {
    this.flushIntervalMs = options.flushIntervalMs ?? 100;
    this.flushBytes = options.flushBytes ?? 64 * 1024;
    this.maxSocketBufferBytes = options.maxSocketBufferBytes ?? 4 * 1024 * 1024;
    this.now = options.now ?? Date.now;
  }

  /** Opens (or returns the open) sink of an assignment. `firstSeq` continues a restored assignment's numbering. */
  open(assignmentId: string, options: { firstSeq?: number } = {}): LogSink {
    let box = this.outboxes.get(assignmentId);
    if (!box) {
      box = new LogOutbox({ assignmentId, spoolDir: this.options.spoolDir, memoryBytes: this.options.memoryBytes, firstSeq: options.firstSeq ?? 0 });
      this.outboxes.set(assignmentId, box);
    }
    const outbox = box;
    return {
      assignmentId,
      write: (stream, line, atMs) => this.write(outbox, stream, line, atMs ?? this.now()),
      get nextSeq() {
        return outbox.nextSeq;
      },
      drained: () => this.drained(outbox),
      release: () => this.release(assignmentId),
    };
  }

  /** Assignments with an outbox and the seq their next line gets (for `hello.running`). */
  assignments(): Array<{ assignmentId: string; nextSeq: number; unacked: number }> {
    return [...this.outboxes.values()].map((b) => ({ assignmentId: b.assignmentId, nextSeq: b.nextSeq, unacked: b.unacked }));
  }

  /** Figures for status and the bench. */
  stats(assignmentId: string): { nextSeq: number; lastAcked: number; unacked: number; spilled: number; spilledTotal: number; memoryCost: number } | null {
    const b = this.outboxes.get(assignmentId);
    return b ? { nextSeq: b.nextSeq, lastAcked: b.lastAcked, unacked: b.unacked, spilled: b.spilled, spilledTotal: b.spilledTotalCount, memoryCost: b.memoryCost } : null;
  }

  /** A `logs.ack` from the server. */
  onAck(assignmentId: string, seq: number): void {
    const box = this.outboxes.get(assignmentId);
    if (!box) return;
    box.ack(seq);
    if (box.unacked === 0) this.wake(assignmentId);
    this.flush();
  }

  /** After `welcome`: rewind every outbox to the server's last stored seq and send again. */
  onReconnected(acked: Array<{ assignmentId: string; seq: number | null }>): void {
    const byId = new Map(acked.map((a) => [a.assignmentId, a.seq]));
    for (const box of this.outboxes.values()) {
      box.rewind(byId.get(box.assignmentId) ?? null);
      if (box.unacked === 0) this.wake(box.assignmentId);
    }
    this.flush();
  }

  /** Sends what waits, as far as the socket allows. Called by the timer, by size, on acks and reconnects. */
  flush(): void {
    if (this.timer) {
      clearTimeout(this.timer);
      this.timer = null;
    }
    this.pendingBytes = 0;
    for (const box of this.outboxes.values()) box.flushSpill();
    if (!this.transport.isReady()) return;
    let more = true;
    while (more) {
      more = false;
      for (const box of this.outboxes.values()) {
        if (this.transport.bufferedAmount() > this.maxSocketBufferBytes) {
          this.arm(10);
          return;
        }
        const lines = box.takeBatch(this.flushBytes, MAX_LOG_BATCH_LINES);
        if (lines.length === 0) continue;
        this.transport.send({ type: 'logs', assignmentId: box.assignmentId, lines });
        if (box.hasSendable) more = true;
      }
    }
  }

  /** Stops the timer; outboxes stay (their spill files remain for a restart to find). */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private write(box: LogOutbox, stream: LogStream, line: string, atMs: number): number {
    let seq = -1;
    if (line.length <= MAX_LOG_LINE_CHARS) {
      seq = box.append(stream, line, atMs);
      this.pendingBytes += line.length + 48;
    } else {
      for (let i = 0; i < line.length; i += MAX_LOG_LINE_CHARS) {
        seq = box.append(stream, line.slice(i, i + MAX_LOG_LINE_CHARS), atMs);
      }
      this.pendingBytes += line.length + 48;
    }
    if (this.pendingBytes >= this.flushBytes) this.flush();
    else this.arm(this.flushIntervalMs);
    return seq;
  }

  private arm(ms: number): void {
    if (this.timer || this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.flush();
    }, ms);
  }

  private drained(box: LogOutbox): Promise<void> {
    if (box.unacked === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const list = this.waiters.get(box.assignmentId) ?? [];
      list.push(resolve);
      this.waiters.set(box.assignmentId, list);
    });
  }

  private wake(assignmentId: string): void {
    const list = this.waiters.get(assignmentId);
    if (!list) return;
    this.waiters.delete(assignmentId);
    for (const resolve of list) resolve();
  }

  private release(assignmentId: string): void {
    const box = this.outboxes.get(assignmentId);
    if (!box) return;
    box.close();
    this.outboxes.delete(assignmentId);
    this.wake(assignmentId);
  }
}

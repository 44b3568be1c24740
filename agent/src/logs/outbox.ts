import { closeSync, mkdirSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { LogBatchLine } from '@gpufarm/shared';

/**
 * The unacked log lines of one assignment, in seq order, until the server acks them.
 *
 * Memory holds at most `memoryBytes` of lines; past that, new lines are appended to a spill
 * file (`<spoolDir>/<assignmentId>.jsonl`) and read back, in order, as acks free memory. Every
 * line in memory has a lower seq than every line on disk, so sending walks memory only and
 * in-flight lines are bounded by the memory budget. After a reconnect the sender rewinds to
 * the first unacked seq (`rewind`) and everything from there is sent again.
 */
export interface OutboxOptions {
  assignmentId: string;
  spoolDir: string;
  memoryBytes: number;
  /** The seq of the first line appended (a restored assignment continues its numbering). */
  firstSeq?: number;
}

/** Rough memory cost of a line: its text plus the object around it. */
const lineCost = (line: LogBatchLine) => line.line.length * 2 + 64;

export class LogOutbox {
  readonly assignmentId: string;
  private readonly spoolPath: string;
  private readonly memoryBytes: number;
  private mem: LogBatchLine[] = [];
  private memStart = 0; // index of the first live line in mem (acked lines before it)
  private memCost = 0;
  /** Next seq to hand out. */
  private nextSeqValue: number;
  /** Highest acked seq (-1: none). */
  private ackedSeq: number;
  /** Next seq to send. */
  private sendSeq: number;
  private spillFd: number | null = null;
  private spillWriteOffset = 0;
  private spillReadOffset = 0;
  private spillCount = 0;
  private spillPending: string[] = [];
  private spilledTotal = 0;

  constructor(options: OutboxOptions) {
    this.assignmentId = options.assignmentId;
    this.memoryBytes = options.memoryBytes;
    this.spoolPath = join(options.spoolDir, `${options.assignmentId}.jsonl`);
    mkdirSync(options.spoolDir, { recursive: true, mode: 0o700 });
    this.nextSeqValue = options.firstSeq ?? 0;
    this.ackedSeq = this.nextSeqValue - 1;
    this.sendSeq = this.nextSeqValue;
  }

  get nextSeq(): number {
    return this.nextSeqValue;
  }
  get lastAcked(): number {
    return this.ackedSeq;
  }
  /** Lines appended but not acked yet. */
  get unacked(): number {
    return this.nextSeqValue - 1 - this.ackedSeq;
  }
  /** Lines waiting on disk right now. */
  get spilled(): number {
    return this.spillCount + this.spillPending.length;
  }
  /** Lines that ever went through the spill file. */
  get spilledTotalCount(): number {
    return this.spilledTotal;
  }
  get memoryCost(): number {
    return this.memCost;
  }
  /** True when a line at or after the send cursor is in memory. */
  get hasSendable(): boolean {
    return this.sendSeq < this.memEndSeq();
  }

  /** Adds a line; returns its seq. */
  append(stream: LogBatchLine['stream'], text: string, atMs: number): number {
    const seq = this.nextSeqValue++;
    const line: LogBatchLine = { seq, stream, atMs, line: text };
    if (this.spilled === 0 && this.memCost < this.memoryBytes) {
      this.mem.push(line);
      this.memCost += lineCost(line);
    } else {
      this.spillPending.push(JSON.stringify(line));
      this.spilledTotal++;
      if (this.spillPending.length >= 1024) this.flushSpill();
    }
    return seq;
  }

  /**
   * Up to `maxBytes` (roughly) of consecutive lines from the send cursor, which moves past them.
   * Empty when nothing in memory waits to be sent.
   */
  takeBatch(maxBytes: number, maxLines: number): LogBatchLine[] {
    const out: LogBatchLine[] = [];
    let bytes = 0;
    let i = this.memStart + (this.sendSeq - this.memFirstSeq());
    while (i < this.mem.length && out.length < maxLines) {
      const line = this.mem[i]!;
      const size = line.line.length + 48;
      if (out.length > 0 && bytes + size > maxBytes) break;
      out.push(line);
      bytes += size;
      i++;
    }
    if (out.length > 0) this.sendSeq = out[out.length - 1]!.seq + 1;
    return out;
  }

  /** Drops every line at or below `seq`, then refills memory from the spill file. */
  ack(seq: number): void {
    if (seq <= this.ackedSeq) return;
    const upTo = Math.min(seq, this.nextSeqValue - 1);
    while (this.memStart < this.mem.length && this.mem[this.memStart]!.seq <= upTo) {
      this.memCost -= lineCost(this.mem[this.memStart]!);
      this.memStart++;
    }
    if (this.memStart > 4096 && this.memStart * 2 > this.mem.length) {
      this.mem = this.mem.slice(this.memStart);
      this.memStart = 0;
    }
    this.ackedSeq = upTo;
    if (this.sendSeq <= upTo) this.sendSeq = upTo + 1;
    this.refill();
  }

  /** After a reconnect: send again from the line after `serverAcked` (or the last ack seen). */
  rewind(serverAcked: number | null): void {
    if (serverAcked !== null && serverAcked > this.ackedSeq) this.ack(serverAcked);
    this.sendSeq = this.ackedSeq + 1;
  }

  /** Writes buffered spill lines to the file (called on each flush tick). */
  flushSpill(): void {
    if (this.spillPending.length === 0) return;
    if (this.spillFd === null) {
      this.spillFd = openSync(this.spoolPath, 'w+', 0o600);
      this.spillWriteOffset = 0;
      this.spillReadOffset = 0;
    }
    const data = Buffer.from(`${this.spillPending.join('\n')}\n`, 'utf8');
    writeSync(this.spillFd, data, 0, data.length, this.spillWriteOffset);
    this.spillWriteOffset += data.length;
    this.spillCount += this.spillPending.length;
    this.spillPending = [];
  }

  /** Removes the spill file. */
  close(): void {
    if (this.spillFd !== null) closeSync(this.spillFd);
    this.spillFd = null;
    rmSync(this.spoolPath, { force: true });
  }

  private memFirstSeq(): number {
    return this.mem.length > this.memStart ? this.mem[this.memStart]!.seq : this.memEndSeq();
  }

  private memEndSeq(): number {
    if (this.mem.length > this.memStart) return this.mem[this.mem.length - 1]!.seq + 1;
    return this.ackedSeq + 1;
  }

  private refill(): void {
    if (this.spilled === 0) return;
    this.flushSpill();
    const fd = this.spillFd!;
    const chunk = Buffer.allocUnsafe(256 * 1024);
    while (this.spillCount > 0 && this.memCost < this.memoryBytes) {
      const n = readSync(fd, chunk, 0, chunk.length, this.spillReadOffset);
      if (n === 0) break;
      const text = chunk.toString('utf8', 0, n);
      const lastNewline = text.lastIndexOf('\n');
      if (lastNewline < 0) throw new Error(`log spill ${this.spoolPath}: a line longer than the read buffer`);
      let consumed = 0;
      let start = 0;
      while (start <= lastNewline && this.memCost < this.memoryBytes) {
        const end = text.indexOf('\n', start);
        const line = JSON.parse(text.slice(start, end)) as LogBatchLine;
        this.mem.push(line);
        this.memCost += lineCost(line);
        this.spillCount--;
        consumed += Buffer.byteLength(text.slice(start, end + 1), 'utf8');
        start = end + 1;
      }
      this.spillReadOffset += consumed;
    }
    if (this.spillCount === 0 && this.spillPending.length === 0 && this.spillFd !== null) {
      closeSync(this.spillFd);
      this.spillFd = null;
      rmSync(this.spoolPath, { force: true });
    }
  }
}

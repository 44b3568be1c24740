import { closeSync, constants, openSync, readSync } from 'node:fs';
import { errorText, MAX_REPORTED_XIDS, type GpuXid } from '@gpufarm/shared';
import { normalizePciBusId } from './nvidia-smi-xml.js';

/**
 * XID errors from the kernel log. The NVIDIA driver reports GPU faults only there, as
 * `NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.`,
 * and names each GPU once at load as `NVRM: GPU at PCI:0000:3b:00: GPU-<uuid>`.
 * `/dev/kmsg` gives one record per read (`6,1234,5678901,-;NVRM: …`) and EAGAIN once it has
 * no more (opened non-blocking); a `dmesg` text file gives lines with `[  12.345]` stamps.
 * Both are read the same way: sequential reads from where the last poll stopped.
 */

export type KernelLogLine =
  | { kind: 'xid'; pciBusId: string; code: number; detail: string }
  | { kind: 'gpu_at'; pciBusId: string; uuid: string };

const XID_LINE = /NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+),?\s*(.*)$/;
const GPU_AT_LINE = /NVRM: GPU at PCI:([0-9a-fA-F:.]+): (GPU-[0-9a-fA-F-]+)/;

/** One kernel message (a kmsg record or a dmesg line): an XID, a GPU's PCI address, or nothing of ours. */
export function parseKernelLogLine(line: string): KernelLogLine | null {
  const xid = XID_LINE.exec(line);
  if (xid) {
    const pciBusId = normalizePciBusId(xid[1]!);
    return pciBusId === null ? null : { kind: 'xid', pciBusId, code: Number(xid[2]), detail: xid[3]!.trim().slice(0, 200) };
  }
  const at = GPU_AT_LINE.exec(line);
  if (at) {
    const pciBusId = normalizePciBusId(at[1]!);
    return pciBusId === null ? null : { kind: 'gpu_at', pciBusId, uuid: at[2]! };
  }
  return null;
}

/** Most bytes one poll reads, so a flood of kernel messages cannot stall an inventory refresh. */
const MAX_POLL_BYTES = 4 * 1024 * 1024;
/** One read of the kernel log, and the longest line kept across reads. */
const READ_BYTES = 64 * 1024;

/**
 * Follows a kernel log and keeps, per GPU (normalized PCI bus id), the XID codes seen since the
 * agent started: how often and when last (the time the agent read it). Opened on first poll;
 * when it cannot be read (no permission, no such file) `problem` says why and the next poll
 * tries again.
 */
export class KernelLogWatcher {
  private fd: number | null = null;
  private partial = '';
  private readonly xids = new Map<string, Map<number, GpuXid>>();
  private readonly uuids = new Map<string, string>();
  // One read buffer for every poll: polls come each heartbeat and mostly find nothing new.
  private readonly buf = Buffer.alloc(READ_BYTES);
  problem: string | null = null;

  constructor(private readonly path: string, private readonly now: () => Date = () => new Date()) {}

  /** Reads what arrived since the last poll. */
  poll(): void {
    if (this.fd === null) {
      try {
        this.fd = openSync(this.path, constants.O_RDONLY | constants.O_NONBLOCK);
        this.problem = null;
      } catch (err) {
        this.problem = `the kernel log ${this.path} cannot be read (${(err as NodeJS.ErrnoException).code ?? errorText(err)}): XID errors are not seen`;
        return;
      }
    }
    const buf = this.buf;
    let total = 0;
    while (total < MAX_POLL_BYTES) {
      let n: number;
      try {
        n = readSync(this.fd, buf, 0, buf.length, null);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        // kmsg: EAGAIN when drained; EPIPE when records were overwritten before we read them.
        if (code === 'EPIPE') continue;
        if (code !== 'EAGAIN') this.problem = `reading the kernel log ${this.path} failed (${code ?? errorText(err)})`;
        break;
      }
      if (n === 0) break;
      total += n;
      this.take(buf.toString('utf8', 0, n));
    }
  }

  private take(chunk: string): void {
    const lines = (this.partial + chunk).split('\n');
    this.partial = lines.pop() ?? '';
    if (this.partial.length > READ_BYTES) this.partial = '';
    for (const line of lines) {
      const parsed = parseKernelLogLine(line);
      if (parsed === null) continue;
      if (parsed.kind === 'gpu_at') {
        this.uuids.set(parsed.pciBusId, parsed.uuid);
        continue;
      }
      let codes = this.xids.get(parsed.pciBusId);
      if (!codes) this.xids.set(parsed.pciBusId, (codes = new Map()));
      const had = codes.get(parsed.code);
      codes.delete(parsed.code);
      codes.set(parsed.code, { code: parsed.code, count: (had?.count ?? 0) + 1, lastAt: this.now().toISOString(), detail: parsed.detail });
      // Oldest-seen codes go first (a Map keeps insertion order and each sighting re-inserts).
      while (codes.size > MAX_REPORTED_XIDS) codes.delete(codes.keys().next().value!);
    }
  }

  /** XID codes seen for the GPU at this PCI bus id (any spelling), most recent last. */
  xidsFor(pciBusId: string | null): GpuXid[] {
    const key = pciBusId === null ? null : normalizePciBusId(pciBusId);
    return key === null ? [] : [...(this.xids.get(key)?.values() ?? [])];
  }

  /** The UUID the driver named for this PCI bus id at load, if the log had it. */
  uuidAt(pciBusId: string | null): string | null {
    const key = pciBusId === null ? null : normalizePciBusId(pciBusId);
    return key === null ? null : (this.uuids.get(key) ?? null);
  }

  close(): void {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}

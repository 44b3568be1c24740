import { createHash, randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Host checks of the benchmark: sequential disk write (1 MiB blocks, fsync at the end, so the
 * figure is what reaches the device, not the page cache) in the work directory, and SHA-256
 * throughput of one core (what hashing outputs and inputs costs). MB/s are 10^6 bytes per second.
 */
export async function measureDiskWriteMBps(dir: string, totalBytes = 256 * 1024 * 1024): Promise<number> {
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `.gf-bench-${process.pid}-${Date.now()}`);
  const block = randomBytes(1024 * 1024);
  const fd = openSync(path, 'w', 0o600);
  try {
    const started = performance.now();
    for (let written = 0; written < totalBytes; written += block.length) writeSync(fd, block);
    fsyncSync(fd);
    const seconds = (performance.now() - started) / 1000;
    return round(totalBytes / 1e6 / seconds);
  } finally {
    closeSync(fd);
    rmSync(path, { force: true });
  }
}

export function measureSha256MBps(totalBytes = 512 * 1024 * 1024): number {
  const block = randomBytes(1024 * 1024);
  const hash = createHash('sha256');
  const started = performance.now();
  for (let done = 0; done < totalBytes; done += block.length) hash.update(block);
  hash.digest();
  return round(totalBytes / 1e6 / ((performance.now() - started) / 1000));
}

const round = (n: number) => Math.round(n * 10) / 10;

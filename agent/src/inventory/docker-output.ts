/**
 * Splits the multiplexed output of a non-TTY container (`container.logs()` as one Buffer):
 * frames of an 8-byte header (stream byte, 3 zero bytes, big-endian length) and the payload.
 */
export function demuxDockerOutput(buf: Buffer): { stdout: string; stderr: string } {
  const out: Buffer[] = [];
  const err: Buffer[] = [];
  let i = 0;
  while (i + 8 <= buf.length) {
    const stream = buf[i]!;
    const size = buf.readUInt32BE(i + 4);
    const payload = buf.subarray(i + 8, i + 8 + size);
    (stream === 2 ? err : out).push(payload);
    i += 8 + size;
  }
  return { stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
}

import { createHash } from 'node:crypto';

/**
 * The GPU challenge's exact work (docs/decisions.md, "GPU proof"): what a machine computes and
 * what the server checks. The same definitions are in C in `agent/gpu-bench/src/shared.h`, which
 * gpu-bench runs on the GPU; `shared/test/gpu-challenge.test.ts` pins both to the same vectors.
 *
 * One GPU's chain, over `rounds` rounds of an m × k by k × n product (m = n·batch: a round is
 * `batch` products of n × n matrices sharing B, stacked):
 *
 *   Bt          = int8 matrix n × k from seedFor('b', preSeed, gpu)       (fixed for the challenge)
 *   seed[0]     = seedFor('gpu', goSeed, gpu)                             (goSeed unknown until "go")
 *   A[r]        = int8 matrix m × k from seed[r]
 *   C[r][i][j]  = Σ_t A[r][i][t] · Bt[j][t], in int32                      (exact on every GPU and CPU)
 *   root[r]     = Merkle root over leafHash(i, C[r][i]) for i < m
 *   seed[r + 1] = SHA-256(seed[r] ‖ root[r])
 *
 * Every round's inputs depend on the previous round's whole result, so rounds can neither be
 * computed ahead nor in parallel; the server recomputes single rows of rounds it picks after the
 * machine committed to every root.
 */

/** Bytes that start every derived seed: another protocol's hashes can never be one of ours. */
export const GPU_CHALLENGE_PROTOCOL = 'gpufarm-gpu-challenge/1';
/** A row of C is hashed in chunks of this many int32 (1 KiB), so a GPU hashes them in parallel. */
export const CHALLENGE_CHUNK_INT32 = 256;
/** m, n and k: powers of two from this (one chunk per row at least); n and k up to 16384, m to 2^20. */
export const CHALLENGE_MIN_SIZE = 256;
export const CHALLENGE_MAX_SIZE = 16384;
export const CHALLENGE_MAX_ROWS = 1 << 20;

function sha256(...parts: Uint8Array[]): Buffer {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
}

function u32le(value: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(value >>> 0);
  return b;
}

/**
 * A per-GPU seed: SHA-256(protocol ‖ 0x00 ‖ label ‖ 0x00 ‖ seed ‖ UUID), the GPU's UUID as
 * nvidia-smi prints it (`GPU-` and lower-case hex, ASCII): each GPU's chain is its own, whatever
 * order a container numbers the GPUs in.
 */
export function seedFor(label: 'b' | 'gpu', seed: Uint8Array, gpuUuid: string): Buffer {
  return sha256(Buffer.from(`${GPU_CHALLENGE_PROTOCOL}\0${label}\0`, 'latin1'), seed, Buffer.from(gpuUuid, 'latin1'));
}

/** The next round's seed: SHA-256(seed ‖ root). */
export function nextRoundSeed(seed: Uint8Array, root: Uint8Array): Buffer {
  return sha256(seed, root);
}

/** MurmurHash3's 32-bit finalizer: a bijection that spreads every input bit over the word. */
function mix32(x: number): number {
  x ^= x >>> 16;
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/**
 * Elements [first, first + count) of the int8 matrix of `seed`, row-major, into `out`. Element
 * e is byte e % 4 (little-endian) of the word of group g = e / 4:
 *
 *   word(g) = mix32(mix32(g · 0x9E3779B9 + s0) ^ s1) + s2)      s0, s1, s2: the seed's first
 *                                                              three little-endian words
 * Counter-based, so any row is made without the rows before it (the server makes one row of A).
 * `first` and `count` are multiples of 4; matrices hold at most 2^32 elements.
 */
export function fillInt8(seed: Uint8Array, first: number, count: number, out: Int8Array, outOffset = 0): void {
  if (first % 4 !== 0 || count % 4 !== 0) throw new RangeError('fillInt8 works on whole groups of 4 elements');
  const s = Buffer.from(seed.buffer, seed.byteOffset, seed.byteLength);
  const s0 = s.readUInt32LE(0);
  const s1 = s.readUInt32LE(4);
  const s2 = s.readUInt32LE(8);
  const firstGroup = first / 4;
  for (let g = 0; g < count / 4; g++) {
    const group = firstGroup + g;
    const w = mix32((mix32((Math.imul(group, 0x9e3779b9) + s0) >>> 0) ^ s1) + s2);
    const at = outOffset + g * 4;
    out[at] = (w << 24) >> 24;
    out[at + 1] = (w << 16) >> 24;
    out[at + 2] = (w << 8) >> 24;
    out[at + 3] = w >> 24;
  }
}

/** The whole int8 matrix (rows × k) of a seed. */
export function int8Matrix(seed: Uint8Array, rows: number, k: number): Int8Array {
  const out = new Int8Array(rows * k);
  fillInt8(seed, 0, rows * k, out);
  return out;
}

/** Row i of C = A · Btᵀ from row i of A (k elements) and Bt (n × k): n int32. */
export function productRow(aRow: Int8Array, bt: Int8Array, n: number, k: number): Int32Array {
  const row = new Int32Array(n);
  for (let j = 0; j < n; j++) {
    let sum = 0;
    const base = j * k;
    for (let t = 0; t < k; t++) sum += aRow[t]! * bt[base + t]!;
    row[j] = sum;
  }
  return row;
}

/**
 * A row's leaf: SHA-256(0x00 ‖ u32le(i) ‖ SHA-256(chunk 0) ‖ … ), each chunk
 * `CHALLENGE_CHUNK_INT32` int32 of the row, little-endian.
 */
export function leafHash(index: number, row: Int32Array): Buffer {
  const bytes = Buffer.alloc(row.length * 4);
  for (let j = 0; j < row.length; j++) bytes.writeInt32LE(row[j]!, j * 4);
  const parts: Uint8Array[] = [Buffer.from([0]), u32le(index)];
  for (let at = 0; at < bytes.length; at += CHALLENGE_CHUNK_INT32 * 4) parts.push(sha256(bytes.subarray(at, at + CHALLENGE_CHUNK_INT32 * 4)));
  return sha256(...parts);
}

/** An inner node: SHA-256(0x01 ‖ left ‖ right); the leaf count is a power of two. */
export function nodeHash(left: Uint8Array, right: Uint8Array): Buffer {
  return sha256(Buffer.from([1]), left, right);
}

/** Every level of the tree over `leaves` (a power of two of them), leaves first, root last. */
export function merkleLevels(leaves: Buffer[]): Buffer[][] {
  if (leaves.length === 0 || (leaves.length & (leaves.length - 1)) !== 0) throw new RangeError('a Merkle tree needs a power of two of leaves');
  const levels = [leaves];
  while (levels[levels.length - 1]!.length > 1) {
    const below = levels[levels.length - 1]!;
    const level: Buffer[] = [];
    for (let i = 0; i < below.length; i += 2) level.push(nodeHash(below[i]!, below[i + 1]!));
    levels.push(level);
  }
  return levels;
}

/** The siblings from leaf `index` up to the root. */
export function merklePath(levels: Buffer[][], index: number): Buffer[] {
  const path: Buffer[] = [];
  for (let level = 0, i = index; level < levels.length - 1; level++, i >>= 1) path.push(levels[level]![i ^ 1]!);
  return path;
}

/** The root a leaf and its path lead to. */
export function rootFromPath(leaf: Uint8Array, index: number, path: Uint8Array[]): Buffer {
  let node: Buffer = Buffer.from(leaf);
  for (let level = 0, i = index; level < path.length; level++, i >>= 1) {
    node = i & 1 ? nodeHash(path[level]!, node) : nodeHash(node, path[level]!);
  }
  return node;
}

/** C is m × n, the inner dimension k. */
export interface ChallengeShape {
  m: number;
  n: number;
  k: number;
}

export function assertChallengeShape({ m, n, k }: ChallengeShape): void {
  for (const [name, v, max] of [['m', m, CHALLENGE_MAX_ROWS], ['n', n, CHALLENGE_MAX_SIZE], ['k', k, CHALLENGE_MAX_SIZE]] as const) {
    if (!Number.isInteger(v) || v < CHALLENGE_MIN_SIZE || v > max || (v & (v - 1)) !== 0) {
      throw new RangeError(`${name} must be a power of two from ${CHALLENGE_MIN_SIZE} to ${max}, not ${v}`);
    }
  }
}

/**
 * One round on the CPU (what a simulated GPU runs, and the reference the tests hold the GPU
 * program to): the Merkle tree of C = A · Btᵀ for A of `seed`.
 */
export function solveRound(seed: Uint8Array, bt: Int8Array, shape: ChallengeShape): { levels: Buffer[][]; rows: Int32Array[] } {
  const { m, n, k } = shape;
  const a = int8Matrix(seed, m, k);
  const rows: Int32Array[] = [];
  for (let i = 0; i < m; i++) rows.push(productRow(a.subarray(i * k, (i + 1) * k), bt, n, k));
  return { levels: merkleLevels(rows.map((row, i) => leafHash(i, row))), rows };
}

/** A whole chain on the CPU: each round's root, and its seed (seed[r] is the seed of round r). */
export function solveChain(params: { preSeed: Uint8Array; goSeed: Uint8Array; gpu: string; rounds: number } & ChallengeShape): { roots: Buffer[]; seeds: Buffer[] } {
  assertChallengeShape(params);
  const bt = int8Matrix(seedFor('b', params.preSeed, params.gpu), params.n, params.k);
  const seeds = [seedFor('gpu', params.goSeed, params.gpu)];
  const roots: Buffer[] = [];
  for (let r = 0; r < params.rounds; r++) {
    const { levels } = solveRound(seeds[r]!, bt, params);
    roots.push(levels[levels.length - 1]![0]!);
    seeds.push(nextRoundSeed(seeds[r]!, roots[r]!));
  }
  return { roots, seeds: seeds.slice(0, params.rounds) };
}

/** Each round's seed, from the go seed and the committed roots (what the server derives). */
export function chainSeeds(goSeed: Uint8Array, gpu: string, roots: Uint8Array[]): Buffer[] {
  const seeds = [seedFor('gpu', goSeed, gpu)];
  for (let r = 0; r + 1 < roots.length; r++) seeds.push(nextRoundSeed(seeds[r]!, roots[r]!));
  return seeds;
}

/**
 * What a machine sends for one opened row: the Merkle path of its leaf. The row itself is not
 * sent: the server computes it, and only the product's row leads to the committed root.
 */
export interface RowOpening {
  round: number;
  row: number;
  path: Uint8Array[];
}

/** What the server derives once per GPU before checking its rows: the round seeds and Bt. */
export interface PreparedCheck extends ChallengeShape {
  gpu: string;
  roots: Uint8Array[];
  seeds: Buffer[];
  bt: Int8Array;
}

/** Derives a GPU's round seeds (from the committed roots) and Bt (n · k / 4 hashes of the generator). */
export function prepareCheck(params: { preSeed: Uint8Array; goSeed: Uint8Array; gpu: string; roots: Uint8Array[] } & ChallengeShape): PreparedCheck {
  assertChallengeShape(params);
  return {
    m: params.m,
    n: params.n,
    k: params.k,
    gpu: params.gpu,
    roots: params.roots,
    seeds: chainSeeds(params.goSeed, params.gpu, params.roots),
    bt: int8Matrix(seedFor('b', params.preSeed, params.gpu), params.n, params.k),
  };
}

/**
 * One opened row (k · n multiply-adds): null when the product's row, with the path sent, leads
 * to the committed root of its round, else why not.
 */
export function checkOpening(check: PreparedCheck, o: RowOpening): string | null {
  const { m, n, k, roots } = check;
  const where = `${check.gpu} round ${o.round} row ${o.row}`;
  if (!Number.isInteger(o.round) || o.round < 0 || o.round >= roots.length) return `${where}: no such round (the chain has ${roots.length})`;
  if (!Number.isInteger(o.row) || o.row < 0 || o.row >= m) return `${where}: no such row (C has ${m})`;
  const depth = Math.log2(m);
  if (o.path.length !== depth) return `${where}: the Merkle path has ${o.path.length} hashes, not ${depth}`;
  const aRow = new Int8Array(k);
  fillInt8(check.seeds[o.round]!, o.row * k, k, aRow);
  const expected = productRow(aRow, check.bt, n, k);
  if (!rootFromPath(leafHash(o.row, expected), o.row, o.path).equals(Buffer.from(roots[o.round]!))) {
    return `${where}: the product's row and the Merkle path sent do not lead to the committed root (the row was not computed, or the path is wrong)`;
  }
  return null;
}

/**
 * The server's check of opened rows of one GPU's chain (pure but for CPU: k · n multiply-adds
 * per row and n · k / 4 hashes once for Bt). Returns null when the product's row and its path
 * lead to the committed root of its round, for every row, else the first reason it does not.
 */
export function checkOpenings(params: { preSeed: Uint8Array; goSeed: Uint8Array; gpu: string; roots: Uint8Array[]; openings: RowOpening[] } & ChallengeShape): string | null {
  const check = prepareCheck(params);
  for (const o of params.openings) {
    const reason = checkOpening(check, o);
    if (reason !== null) return reason;
  }
  return null;
}

/**
 * The chance that a machine which did only `fraction` of the work passes `checks` opened rows
 * drawn independently and uniformly (over rounds and rows): each lands on computed work with
 * probability at most `fraction`, whether the machine skipped whole rounds or rows within
 * them (a skipped round's root covers no correct row; a skipped row's leaf is not the row's).
 */
export function passProbability(fraction: number, checks: number): number {
  return Math.pow(Math.min(Math.max(fraction, 0), 1), checks);
}

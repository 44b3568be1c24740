/*
 * The GPU challenge's exact work in C, for the GPU code, the host program and the tests: the
 * same definitions as shared/src/proof/gpu-challenge.ts (which documents them), pinned to the
 * same vectors by shared/test/gpu-challenge.test.ts. SHA-256 is FIPS 180-4's, written out here
 * because the GPU needs it and the program links no library for it.
 */
#ifndef GPU_BENCH_CHALLENGE_H
#define GPU_BENCH_CHALLENGE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shared.h"

#define GB_CHALLENGE_PROTOCOL "gpufarm-gpu-challenge/1"
#define GB_CHALLENGE_CHUNK_INT32 256u

/* The int8 product's tiling: a block computes 128 x 128 of C over k in steps of 64 bytes, with
   8 warps of 64 x 32. Shared memory holds each 16-byte k-slice of a tile as its own 128 x 16
   matrix, so every fragment starts 256-bit aligned (wmma's rule) and rows are 16 bytes apart. */
#define GB_CH_BM 128u
#define GB_CH_BN 128u
#define GB_CH_BK 64u
#define GB_CH_THREADS 256u
#define GB_CH_WARP_M 64u
#define GB_CH_WARP_N 32u
/* Bytes of one stage: the A tile's 4 slices, then the B tile's. */
#define GB_CH_STAGE_BYTES ((GB_CH_BM + GB_CH_BN) * GB_CH_BK)
/* 16-byte chunk c of a 128-row tile: its row, its k-slice, and where it lies in shared memory. */
GB_FN uint32_t gb_ch_chunk_row(uint32_t c) { return c >> 2; }
GB_FN uint32_t gb_ch_chunk_slice(uint32_t c) { return c & 3u; }
GB_FN uint32_t gb_ch_smem_offset(uint32_t c) { return (gb_ch_chunk_slice(c) * 128u + gb_ch_chunk_row(c)) * 16u; }

typedef struct {
  uint32_t h[8];
  uint8_t buf[64];
  uint32_t used;
  uint64_t bytes;
} gb_sha256;

#define GB_ROTR(x, n) (((x) >> (n)) | ((x) << (32u - (n))))

GB_FN void gb_sha256_block(uint32_t h[8], const uint8_t *p) {
  static const uint32_t k[64] = {
      0x428a2f98u, 0x71374491u, 0xb5c0fbcfu, 0xe9b5dba5u, 0x3956c25bu, 0x59f111f1u, 0x923f82a4u, 0xab1c5ed5u, 0xd807aa98u, 0x12835b01u,
      0x243185beu, 0x550c7dc3u, 0x72be5d74u, 0x80deb1feu, 0x9bdc06a7u, 0xc19bf174u, 0xe49b69c1u, 0xefbe4786u, 0x0fc19dc6u, 0x240ca1ccu,
      0x2de92c6fu, 0x4a7484aau, 0x5cb0a9dcu, 0x76f988dau, 0x983e5152u, 0xa831c66du, 0xb00327c8u, 0xbf597fc7u, 0xc6e00bf3u, 0xd5a79147u,
      0x06ca6351u, 0x14292967u, 0x27b70a85u, 0x2e1b2138u, 0x4d2c6dfcu, 0x53380d13u, 0x650a7354u, 0x766a0abbu, 0x81c2c92eu, 0x92722c85u,
      0xa2bfe8a1u, 0xa81a664bu, 0xc24b8b70u, 0xc76c51a3u, 0xd192e819u, 0xd6990624u, 0xf40e3585u, 0x106aa070u, 0x19a4c116u, 0x1e376c08u,
      0x2748774cu, 0x34b0bcb5u, 0x391c0cb3u, 0x4ed8aa4au, 0x5b9cca4fu, 0x682e6ff3u, 0x748f82eeu, 0x78a5636fu, 0x84c87814u, 0x8cc70208u,
      0x90befffau, 0xa4506cebu, 0xbef9a3f7u, 0xc67178f2u};
  uint32_t w[64];
  for (int i = 0; i < 16; ++i) w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
  for (int i = 16; i < 64; ++i) {
    uint32_t s0 = GB_ROTR(w[i - 15], 7) ^ GB_ROTR(w[i - 15], 18) ^ (w[i - 15] >> 3);
    uint32_t s1 = GB_ROTR(w[i - 2], 17) ^ GB_ROTR(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
  for (int i = 0; i < 64; ++i) {
    uint32_t t1 = hh + (GB_ROTR(e, 6) ^ GB_ROTR(e, 11) ^ GB_ROTR(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
    uint32_t t2 = (GB_ROTR(a, 2) ^ GB_ROTR(a, 13) ^ GB_ROTR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
  }
  h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
}

GB_FN void gb_sha256_init(gb_sha256 *s) {
  static const uint32_t iv[8] = {0x6a09e667u, 0xbb67ae85u, 0x3c6ef372u, 0xa54ff53au, 0x510e527fu, 0x9b05688cu, 0x1f83d9abu, 0x5be0cd19u};
  for (int i = 0; i < 8; ++i) s->h[i] = iv[i];
  s->used = 0;
  s->bytes = 0;
}

GB_FN void gb_sha256_update(gb_sha256 *s, const void *data, size_t len) {
  const uint8_t *p = (const uint8_t *)data;
  s->bytes += len;
  while (len > 0) {
    if (s->used == 0 && len >= 64) {
      gb_sha256_block(s->h, p);
      p += 64;
      len -= 64;
      continue;
    }
    uint32_t take = 64u - s->used < len ? 64u - s->used : (uint32_t)len;
    for (uint32_t i = 0; i < take; ++i) s->buf[s->used + i] = p[i];
    s->used += take;
    p += take;
    len -= take;
    if (s->used == 64) {
      gb_sha256_block(s->h, s->buf);
      s->used = 0;
    }
  }
}

GB_FN void gb_sha256_final(gb_sha256 *s, uint8_t out[32]) {
  uint64_t bits = s->bytes * 8u;
  uint8_t pad = 0x80;
  gb_sha256_update(s, &pad, 1);
  uint8_t zero = 0;
  while (s->used != 56) gb_sha256_update(s, &zero, 1);
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = (uint8_t)(bits >> (56 - 8 * i));
  gb_sha256_update(s, len, 8);
  for (int i = 0; i < 8; ++i) {
    out[4 * i] = (uint8_t)(s->h[i] >> 24);
    out[4 * i + 1] = (uint8_t)(s->h[i] >> 16);
    out[4 * i + 2] = (uint8_t)(s->h[i] >> 8);
    out[4 * i + 3] = (uint8_t)s->h[i];
  }
}

GB_FN void gb_put_u32le(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}

/* seedFor: SHA-256(protocol ‖ 0 ‖ label ‖ 0 ‖ seed ‖ uuid); label "b" or "gpu", uuid as nvidia-smi prints it. */
GB_FN void gb_challenge_seed_for(const char *label, const uint8_t seed[32], const char *uuid, uint8_t out[32]) {
  gb_sha256 s;
  gb_sha256_init(&s);
  const char *protocol = GB_CHALLENGE_PROTOCOL;
  gb_sha256_update(&s, protocol, sizeof(GB_CHALLENGE_PROTOCOL));
  size_t len = 0;
  while (label[len] != '\0') ++len;
  gb_sha256_update(&s, label, len + 1);
  gb_sha256_update(&s, seed, 32);
  len = 0;
  while (uuid[len] != '\0') ++len;
  gb_sha256_update(&s, uuid, len);
  gb_sha256_final(&s, out);
}

/* nextRoundSeed: SHA-256(seed ‖ root). */
GB_FN void gb_challenge_next_seed(const uint8_t seed[32], const uint8_t root[32], uint8_t out[32]) {
  gb_sha256 s;
  gb_sha256_init(&s);
  gb_sha256_update(&s, seed, 32);
  gb_sha256_update(&s, root, 32);
  gb_sha256_final(&s, out);
}

/* An inner Merkle node: SHA-256(1 ‖ left ‖ right). */
GB_FN void gb_challenge_node(const uint8_t left[32], const uint8_t right[32], uint8_t out[32]) {
  uint8_t one = 1;
  gb_sha256 s;
  gb_sha256_init(&s);
  gb_sha256_update(&s, &one, 1);
  gb_sha256_update(&s, left, 32);
  gb_sha256_update(&s, right, 32);
  gb_sha256_final(&s, out);
}

/* The generator's key: the seed's first three little-endian words. */
typedef struct {
  uint32_t s0, s1, s2;
} gb_challenge_key;

GB_FN gb_challenge_key gb_challenge_key_of(const uint8_t seed[32]) {
  gb_challenge_key k;
  k.s0 = (uint32_t)seed[0] | (uint32_t)seed[1] << 8 | (uint32_t)seed[2] << 16 | (uint32_t)seed[3] << 24;
  k.s1 = (uint32_t)seed[4] | (uint32_t)seed[5] << 8 | (uint32_t)seed[6] << 16 | (uint32_t)seed[7] << 24;
  k.s2 = (uint32_t)seed[8] | (uint32_t)seed[9] << 8 | (uint32_t)seed[10] << 16 | (uint32_t)seed[11] << 24;
  return k;
}

GB_FN uint32_t gb_mix32(uint32_t x) {
  x ^= x >> 16; x *= 0x85ebca6bu; x ^= x >> 13; x *= 0xc2b2ae35u; x ^= x >> 16;
  return x;
}

/* The word of group g (elements 4g..4g+3, little-endian bytes) of the int8 matrix of a key. */
GB_FN uint32_t gb_challenge_word(gb_challenge_key k, uint32_t g) {
  return gb_mix32((gb_mix32(g * 0x9e3779b9u + k.s0) ^ k.s1) + k.s2);
}

/* A row's leaf from the hashes of its chunks: SHA-256(0 ‖ u32le(i) ‖ chunk hashes). */
GB_FN void gb_challenge_leaf(uint32_t index, const uint8_t *chunk_hashes, uint32_t chunks, uint8_t out[32]) {
  uint8_t head[5];
  head[0] = 0;
  gb_put_u32le(head + 1, index);
  gb_sha256 s;
  gb_sha256_init(&s);
  gb_sha256_update(&s, head, 5);
  gb_sha256_update(&s, chunk_hashes, (size_t)chunks * 32u);
  gb_sha256_final(&s, out);
}

/* The hash of a chunk of GB_CHALLENGE_CHUNK_INT32 int32 of a row, little-endian. */
GB_FN void gb_challenge_chunk(const int32_t *values, uint8_t out[32]) {
  gb_sha256 s;
  gb_sha256_init(&s);
  uint8_t bytes[64];
  for (uint32_t at = 0; at < GB_CHALLENGE_CHUNK_INT32; at += 16) {
    for (uint32_t j = 0; j < 16; ++j) gb_put_u32le(bytes + 4 * j, (uint32_t)values[at + j]);
    gb_sha256_update(&s, bytes, 64);
  }
  gb_sha256_final(&s, out);
}

#endif

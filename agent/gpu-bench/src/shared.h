/*
 * What the GPU code (kernels.cu), the host program (gpu-bench.cpp) and the tests' fake driver
 * (agent/test/fixtures/fake-libcuda.c) must agree on: the matmul tiling, the index math of its
 * copies and its epilogue (checked on the host by `gpu-bench --self-test`), and the input
 * patterns (the host recomputes them to check the GPU's product). Plain C, so all three include it.
 */
#ifndef GPU_BENCH_SHARED_H
#define GPU_BENCH_SHARED_H

#include <stdint.h>

#if defined(__CUDACC__)
#define GB_FN static __host__ __device__ __forceinline__
#else
#define GB_FN static inline
#endif

/* One block computes a 128 x 256 tile of C over K in steps of 32; 8 warps of 64 x 64 each. */
#define GB_BM 128u
#define GB_BN 256u
#define GB_BK 32u
#define GB_THREADS 256u
#define GB_WARP_M 64u
#define GB_WARP_N 64u
#define GB_WARPS_N (GB_BN / GB_WARP_N)
/* Shared-memory rows are 32 + 8 elements (80 bytes): eight rows read together hit eight different 16-byte bank groups. */
#define GB_LDS (GB_BK + 8u)
/* Blocks walk C in groups of 8 tile rows, so a wave of blocks shares its A and B panels in L2. */
#define GB_GROUP_M 8u
/* Elements (16-bit) and bytes of one pipeline stage: the A tile, then the B tile. */
#define GB_STAGE_ELEMS ((GB_BM + GB_BN) * GB_LDS)
#define GB_STAGE_BYTES (GB_STAGE_ELEMS * 2u)
/* Up to 4 stages where shared memory allows; 2 is the least the pipeline works with. */
#define GB_MAX_STAGES 4u
/* The timed matmul's sizes must be multiples of this (and K of GB_BK). */
#define GB_SIZE_MULTIPLE 256u

/* The tile (row tm, column tn, in tiles) that block `pid` computes: grouped order, every tile once. */
GB_FN void gb_tile_of(uint32_t pid, uint32_t tiles_m, uint32_t tiles_n, uint32_t *tm, uint32_t *tn) {
  uint32_t in_group = GB_GROUP_M * tiles_n;
  uint32_t first_m = (pid / in_group) * GB_GROUP_M;
  uint32_t size_m = tiles_m - first_m < GB_GROUP_M ? tiles_m - first_m : GB_GROUP_M;
  *tm = first_m + (pid % in_group) % size_m;
  *tn = (pid % in_group) / size_m;
}

/* 16-byte chunk c of a tile stored row by row with GB_BK elements a row: its row and first column. */
GB_FN uint32_t gb_chunk_row(uint32_t c) { return c >> 2; }
GB_FN uint32_t gb_chunk_col(uint32_t c) { return (c & 3u) * 8u; }
/* Chunks each thread copies per stage: A has GB_BM rows, B has GB_BN rows, 4 chunks a row. */
#define GB_A_CHUNKS_PER_THREAD (GB_BM * 4u / GB_THREADS)
#define GB_B_CHUNKS_PER_THREAD (GB_BN * 4u / GB_THREADS)

/* Warp w's 64 x 64 tile inside the block's tile. */
GB_FN uint32_t gb_warp_row(uint32_t w) { return (w / GB_WARPS_N) * GB_WARP_M; }
GB_FN uint32_t gb_warp_col(uint32_t w) { return (w % GB_WARPS_N) * GB_WARP_N; }

/* Epilogue: a 16 x 16 accumulator staged row-major; lane l converts and stores 8 values of row l/2. */
GB_FN uint32_t gb_epi_row(uint32_t lane) { return lane >> 1; }
GB_FN uint32_t gb_epi_col(uint32_t lane) { return (lane & 1u) * 8u; }

/* A 32-bit mix of a 64-bit index and a seed (murmur3's finalizer over both halves). */
GB_FN uint32_t gb_hash(uint64_t i, uint32_t seed) {
  uint32_t h = seed ^ (uint32_t)i;
  h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; h ^= h >> 16;
  h ^= (uint32_t)(i >> 32) * 0x9e3779b9u;
  h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; h ^= h >> 16;
  return h;
}

/*
 * Inputs: a random sign and random mantissa bits at exponent -1, so every value lies in
 * ±[0.5, 1), is exact in its format, and toggles as many bits as real data (a matmul of zeros
 * or small integers draws less power and runs at higher clocks than real work).
 */
GB_FN uint16_t gb_pattern_fp16(uint64_t i, uint32_t seed) {
  uint32_t h = gb_hash(i, seed);
  return (uint16_t)(((h & 1u) << 15) | (14u << 10) | ((h >> 1) & 0x3ffu));
}
GB_FN uint16_t gb_pattern_bf16(uint64_t i, uint32_t seed) {
  uint32_t h = gb_hash(i, seed);
  return (uint16_t)(((h & 1u) << 15) | (126u << 7) | ((h >> 1) & 0x7fu));
}

#endif

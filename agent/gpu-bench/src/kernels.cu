// The GPU code of gpu-bench, compiled by nvcc into one fatbin (SASS for each architecture plus
// PTX) that the host program embeds and loads through the driver API. Every kernel is extern "C"
// so the host finds it by name with cuModuleGetFunction.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <mma.h>
#include "challenge.h"
#include "shared.h"

using namespace nvcuda;

// Fills p[0..n) with the input pattern (shared.h) of seed: fp16 when bf16 == 0, bf16 otherwise.
extern "C" __global__ void gb_fill16(uint16_t *p, unsigned long long n, unsigned int seed, unsigned int bf16) {
  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < n; i += (unsigned long long)gridDim.x * blockDim.x) {
    p[i] = bf16 ? gb_pattern_bf16(i, seed) : gb_pattern_fp16(i, seed);
  }
}

__device__ __forceinline__ void cp_async16(void *smem, const void *global) {
#if __CUDA_ARCH__ >= 800
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(global));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}
// Waits until at most stages - 2 copy groups are in flight: the oldest stage has landed.
__device__ __forceinline__ void cp_async_wait_oldest(unsigned stages) {
  if (stages >= 4) cp_async_wait<2>();
  else if (stages == 3) cp_async_wait<1>();
  else cp_async_wait<0>();
}

__device__ __forceinline__ unsigned pack2(float a, float b, __half *) {
  __half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<unsigned *>(&h);
}
__device__ __forceinline__ unsigned pack2(float a, float b, __nv_bfloat16 *) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<unsigned *>(&h);
}

// C (M x N, row-major) = A (M x K, row-major) * B where B is given as N x K row-major (its
// transpose, the layout cuBLAS calls "TN"), fp32 accumulation, C rounded to T. M a multiple of
// 128, N of 256, K of 32; `stages` (2..4) pipeline stages of GB_STAGE_BYTES dynamic shared memory.
template <typename T>
__device__ __forceinline__ void gemm(const T *__restrict__ A, const T *__restrict__ B, T *__restrict__ C, unsigned M, unsigned N, unsigned K, unsigned stages) {
  extern __shared__ __align__(128) unsigned char smem_bytes[];
  T *smem = reinterpret_cast<T *>(smem_bytes);
  const unsigned tid = threadIdx.x, warp = tid / 32u, lane = tid % 32u;
  unsigned tm, tn;
  gb_tile_of(blockIdx.x, M / GB_BM, N / GB_BN, &tm, &tn);
  const T *a_block = A + static_cast<size_t>(tm) * GB_BM * K;
  const T *b_block = B + static_cast<size_t>(tn) * GB_BN * K;
  const unsigned ktiles = K / GB_BK;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

  // One k-tile of the warp's 64 x 64: per 16-deep step, 4 A and 4 B fragments, 16 products.
  auto compute = [&](unsigned stage) {
    const T *sa = smem + stage * GB_STAGE_ELEMS + gb_warp_row(warp) * GB_LDS;
    const T *sb = smem + stage * GB_STAGE_ELEMS + GB_BM * GB_LDS + gb_warp_col(warp) * GB_LDS;
#pragma unroll
    for (unsigned kk = 0; kk < GB_BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(a[i], sa + i * 16 * GB_LDS + kk, GB_LDS);
#pragma unroll
      for (int j = 0; j < 4; ++j) wmma::load_matrix_sync(b[j], sb + j * 16 * GB_LDS + kk, GB_LDS);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
  };

#if __CUDA_ARCH__ >= 800
  // cp.async: k-tiles land in shared memory stages - 1 steps ahead of the one computed.
  auto load = [&](unsigned stage, unsigned kt) {
    T *sa = smem + stage * GB_STAGE_ELEMS;
    T *sb = sa + GB_BM * GB_LDS;
    const T *ga = a_block + kt * GB_BK;
    const T *gb = b_block + kt * GB_BK;
#pragma unroll
    for (unsigned i = 0; i < GB_A_CHUNKS_PER_THREAD; ++i) {
      const unsigned c = tid + i * GB_THREADS, r = gb_chunk_row(c), col = gb_chunk_col(c);
      cp_async16(sa + r * GB_LDS + col, ga + static_cast<size_t>(r) * K + col);
    }
#pragma unroll
    for (unsigned i = 0; i < GB_B_CHUNKS_PER_THREAD; ++i) {
      const unsigned c = tid + i * GB_THREADS, r = gb_chunk_row(c), col = gb_chunk_col(c);
      cp_async16(sb + r * GB_LDS + col, gb + static_cast<size_t>(r) * K + col);
    }
  };
  for (unsigned s = 0; s + 1 < stages; ++s) {
    if (s < ktiles) load(s, s);
    cp_async_commit();
  }
  unsigned read_stage = 0, write_stage = stages - 1;
  for (unsigned kt = 0; kt < ktiles; ++kt) {
    cp_async_wait_oldest(stages);
    // k-tile kt is in shared memory for every thread, and every warp is done with the stage
    // computed last step, which the next load overwrites.
    __syncthreads();
    if (kt + stages - 1 < ktiles) load(write_stage, kt + stages - 1);
    cp_async_commit();  // an empty group near the end keeps the count the wait relies on
    compute(read_stage);
    read_stage = read_stage + 1 == stages ? 0 : read_stage + 1;
    write_stage = write_stage + 1 == stages ? 0 : write_stage + 1;
  }
  cp_async_wait<0>();
#else
  // Turing has no cp.async: the next k-tile is loaded into registers before the products and
  // stored into the other stage after them (two stages).
  uint4 ra[GB_A_CHUNKS_PER_THREAD], rb[GB_B_CHUNKS_PER_THREAD];
  auto fetch = [&](unsigned kt) {
#pragma unroll
    for (unsigned i = 0; i < GB_A_CHUNKS_PER_THREAD; ++i) {
      const unsigned c = tid + i * GB_THREADS;
      ra[i] = *reinterpret_cast<const uint4 *>(a_block + static_cast<size_t>(gb_chunk_row(c)) * K + kt * GB_BK + gb_chunk_col(c));
    }
#pragma unroll
    for (unsigned i = 0; i < GB_B_CHUNKS_PER_THREAD; ++i) {
      const unsigned c = tid + i * GB_THREADS;
      rb[i] = *reinterpret_cast<const uint4 *>(b_block + static_cast<size_t>(gb_chunk_row(c)) * K + kt * GB_BK + gb_chunk_col(c));
    }
  };
  auto store = [&](unsigned stage) {
    T *sa = smem + stage * GB_STAGE_ELEMS;
    T *sb = sa + GB_BM * GB_LDS;
#pragma unroll
    for (unsigned i = 0; i < GB_A_CHUNKS_PER_THREAD; ++i) {
      const unsigned c = tid + i * GB_THREADS;
      *reinterpret_cast<uint4 *>(sa + gb_chunk_row(c) * GB_LDS + gb_chunk_col(c)) = ra[i];
    }
#pragma unroll
    for (unsigned i = 0; i < GB_B_CHUNKS_PER_THREAD; ++i) {
      const unsigned c = tid + i * GB_THREADS;
      *reinterpret_cast<uint4 *>(sb + gb_chunk_row(c) * GB_LDS + gb_chunk_col(c)) = rb[i];
    }
  };
  (void)stages;
  fetch(0);
  store(0);
  for (unsigned kt = 0; kt < ktiles; ++kt) {
    __syncthreads();
    if (kt + 1 < ktiles) fetch(kt + 1);
    compute(kt & 1u);
    if (kt + 1 < ktiles) store((kt + 1) & 1u);
  }
#endif
  // Every warp is done with the stages before any warp reuses their memory for the epilogue.
  __syncthreads();
  float *scratch = reinterpret_cast<float *>(smem_bytes) + warp * 256u;
  const unsigned row0 = tm * GB_BM + gb_warp_row(warp), col0 = tn * GB_BN + gb_warp_col(warp);
  const unsigned r = gb_epi_row(lane), c = gb_epi_col(lane);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      wmma::store_matrix_sync(scratch, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      const float *v = scratch + r * 16u + c;
      uint4 out;
      out.x = pack2(v[0], v[1], static_cast<T *>(nullptr));
      out.y = pack2(v[2], v[3], static_cast<T *>(nullptr));
      out.z = pack2(v[4], v[5], static_cast<T *>(nullptr));
      out.w = pack2(v[6], v[7], static_cast<T *>(nullptr));
      *reinterpret_cast<uint4 *>(C + static_cast<size_t>(row0 + i * 16 + r) * N + col0 + j * 16 + c) = out;
      __syncwarp();
    }
  }
}

extern "C" __global__ void __launch_bounds__(GB_THREADS, 1)
gb_gemm_fp16(const __half *A, const __half *B, __half *C, unsigned M, unsigned N, unsigned K, unsigned stages) {
  gemm<__half>(A, B, C, M, N, K, stages);
}

extern "C" __global__ void __launch_bounds__(GB_THREADS, 1)
gb_gemm_bf16(const __nv_bfloat16 *A, const __nv_bfloat16 *B, __nv_bfloat16 *C, unsigned M, unsigned N, unsigned K, unsigned stages) {
#if __CUDA_ARCH__ >= 800
  gemm<__nv_bfloat16>(A, B, C, M, N, K, stages);
#else
  // bf16 tensor cores start with Ampere; the host never launches this below compute capability 8.0.
  __trap();
#endif
}

// FP32 throughput: 8 independent FMA chains per thread, 128 FMAs per loop turn. The sum is
// stored so the chains are not optimised away; b and c come from the host so they are not folded.
extern "C" __global__ void __launch_bounds__(256) gb_fma(float *out, unsigned iterations, float b, float c) {
  float x[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) x[k] = threadIdx.x * 1e-3f + k;
  for (unsigned i = 0; i < iterations; ++i) {
#pragma unroll
    for (int u = 0; u < 16; ++u)
#pragma unroll
      for (int k = 0; k < 8; ++k) x[k] = fmaf(x[k], b, c);
  }
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += x[k];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// Device memory bandwidth: a copy of n 16-byte words, four loads in flight per thread.
extern "C" __global__ void __launch_bounds__(256) gb_copy(const uint4 *__restrict__ src, uint4 *__restrict__ dst, unsigned long long n) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = d;
  }
  for (; i < n; i += stride) dst[i] = src[i];
}

// ---------------------------------------------------------------------------------------------
// The GPU challenge (challenge.h, shared/src/proof/gpu-challenge.ts): int8 matrices from a seed,
// their exact int32 product, and the Merkle tree of its rows. `seed`, `root` and the tree live in
// device memory, so a whole chain of rounds is enqueued without the host waiting on any round.

// The int8 matrix of the seed at `seed`: group g (4 elements) is word g, little-endian.
extern "C" __global__ void __launch_bounds__(256) gb_ch_fill(uint32_t *out, unsigned long long groups, const uint8_t *seed) {
  const gb_challenge_key key = gb_challenge_key_of(seed);
  for (unsigned long long g = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; g < groups; g += (unsigned long long)gridDim.x * blockDim.x) {
    out[g] = gb_challenge_word(key, static_cast<uint32_t>(g));
  }
}

// C (m x n int32, row-major) = A (m x k int8, row-major) * Bt^T (Bt: n x k int8, row-major), on
// int8 tensor cores with int32 accumulation: exact, so equal on every GPU. m and n multiples of
// 128, k of 64. The next k-tile is loaded into registers during the products (two stages).
extern "C" __global__ void __launch_bounds__(GB_CH_THREADS) gb_ch_gemm(const int8_t *__restrict__ A, const int8_t *__restrict__ Bt, int32_t *__restrict__ C,
                                                                    unsigned m, unsigned n, unsigned k) {
  __shared__ __align__(128) int8_t smem[2][GB_CH_STAGE_BYTES];
  const unsigned tid = threadIdx.x, warp = tid / 32u;
  unsigned tm, tn;
  gb_tile_of(blockIdx.x, m / GB_CH_BM, n / GB_CH_BN, &tm, &tn);
  const int8_t *a_block = A + static_cast<size_t>(tm) * GB_CH_BM * k;
  const int8_t *b_block = Bt + static_cast<size_t>(tn) * GB_CH_BN * k;
  const unsigned warp_row = (warp / 4u) * GB_CH_WARP_M, warp_col = (warp % 4u) * GB_CH_WARP_N;

  wmma::fragment<wmma::accumulator, 16, 16, 16, int> acc[4][2];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0);

  uint4 ra[2], rb[2];
  auto fetch = [&](unsigned kt) {
#pragma unroll
    for (unsigned i = 0; i < 2; ++i) {
      const unsigned c = tid + i * GB_CH_THREADS, off = static_cast<unsigned>(gb_ch_chunk_row(c)) * k + kt * GB_CH_BK + gb_ch_chunk_slice(c) * 16u;
      ra[i] = *reinterpret_cast<const uint4 *>(a_block + off);
      rb[i] = *reinterpret_cast<const uint4 *>(b_block + off);
    }
  };
  auto store = [&](unsigned stage) {
#pragma unroll
    for (unsigned i = 0; i < 2; ++i) {
      const unsigned c = tid + i * GB_CH_THREADS;
      *reinterpret_cast<uint4 *>(&smem[stage][gb_ch_smem_offset(c)]) = ra[i];
      *reinterpret_cast<uint4 *>(&smem[stage][GB_CH_BM * GB_CH_BK + gb_ch_smem_offset(c)]) = rb[i];
    }
  };
  const unsigned ktiles = k / GB_CH_BK;
  fetch(0);
  store(0);
  for (unsigned kt = 0; kt < ktiles; ++kt) {
    __syncthreads();
    if (kt + 1 < ktiles) fetch(kt + 1);
    const int8_t *sa = smem[kt & 1u];
    const int8_t *sb = sa + GB_CH_BM * GB_CH_BK;
#pragma unroll
    for (unsigned slice = 0; slice < GB_CH_BK / 16u; ++slice) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, signed char, wmma::row_major> a[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, signed char, wmma::col_major> b[2];
#pragma unroll
      for (int i = 0; i < 4; ++i) wmma::load_matrix_sync(a[i], sa + (slice * 128u + warp_row + i * 16u) * 16u, 16);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], sb + (slice * 128u + warp_col + j * 16u) * 16u, 16);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
    if (kt + 1 < ktiles) store((kt + 1) & 1u);
  }
  const unsigned row0 = tm * GB_CH_BM + warp_row, col0 = tn * GB_CH_BN + warp_col;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::store_matrix_sync(C + static_cast<size_t>(row0 + i * 16) * n + col0 + j * 16, acc[i][j], n, wmma::mem_row_major);
}

// The hash of each 1 KiB chunk of C: chunk c is C's int32 [256 c, 256 c + 256).
extern "C" __global__ void __launch_bounds__(256) gb_ch_chunks(const int32_t *C, uint8_t *hashes, unsigned long long chunks) {
  for (unsigned long long c = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; c < chunks; c += (unsigned long long)gridDim.x * blockDim.x) {
    gb_challenge_chunk(C + c * GB_CHALLENGE_CHUNK_INT32, hashes + c * 32u);
  }
}

// Row i's leaf from its chunks' hashes.
extern "C" __global__ void __launch_bounds__(256) gb_ch_leaves(const uint8_t *hashes, uint8_t *leaves, unsigned m, unsigned chunks_per_row) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < m; i += gridDim.x * blockDim.x) {
    gb_challenge_leaf(i, hashes + static_cast<size_t>(i) * chunks_per_row * 32u, chunks_per_row, leaves + static_cast<size_t>(i) * 32u);
  }
}

// One level of the tree: node i of `above` from nodes 2i and 2i + 1 of `below`.
extern "C" __global__ void __launch_bounds__(256) gb_ch_level(const uint8_t *below, uint8_t *above, unsigned count) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < count; i += gridDim.x * blockDim.x) {
    gb_challenge_node(below + 64u * i, below + 64u * i + 32u, above + 32u * i);
  }
}

// The next round's seed: SHA-256(seed || root).
extern "C" __global__ void gb_ch_next(const uint8_t *seed, const uint8_t *root, uint8_t *next) {
  if (blockIdx.x == 0 && threadIdx.x == 0) gb_challenge_next_seed(seed, root, next);
}

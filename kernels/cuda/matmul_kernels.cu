// Quantized GEMV, tensor-core GEMM and row dequantization (see matmul.hpp).
#include <mma.h>

#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/quant.cuh"

namespace arbor::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// Output feature r of w for the m activation rows: lane l takes blocks l, l + 32, ...
// (a warp's 32 lanes read 32 consecutive blocks' quants, 512 or 1024 contiguous bytes, in
// 128-bit loads); each block is dequantized once and multiplied with the m rows, whose 32
// values it reads in eight 128-bit loads (x is 16-byte aligned: a device buffer, rows of a
// multiple of 32 floats); then a warp reduction. kGated: the activations are
// silu(x) * up, computed as they are read (the FFN's down projection).
template <bool kGated>
__device__ void gemv_row(const DeviceMatrix& w, std::int64_t r, int lane, const float* __restrict__ x,
                         const float* __restrict__ up, int m, float* __restrict__ y) {
  const std::int64_t num_blocks = w.cols / 32;
  float acc[kGemvMaxRows] = {};
  float v[32];
  for (std::int64_t b = lane; b < num_blocks; b += 32) {
    dequantize_block(w, r, b, v);
#pragma unroll
    for (int i = 0; i < kGemvMaxRows; ++i) {
      if (i >= m) break;
      const std::int64_t at = std::int64_t(i) * w.cols + b * 32;
      const auto* xb = reinterpret_cast<const float4*>(x + at);
      float s = 0.f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float4 x4 = xb[j];
        if constexpr (kGated) {
          const float4 u4 = reinterpret_cast<const float4*>(up + at)[j];
          x4 = {silu_times(x4.x, u4.x), silu_times(x4.y, u4.y), silu_times(x4.z, u4.z), silu_times(x4.w, u4.w)};
        }
        s = fmaf(v[4 * j], x4.x, s);
        s = fmaf(v[4 * j + 1], x4.y, s);
        s = fmaf(v[4 * j + 2], x4.z, s);
        s = fmaf(v[4 * j + 3], x4.w, s);
      }
      acc[i] += s;
    }
  }
#pragma unroll
  for (int i = 0; i < kGemvMaxRows; ++i) {
    if (i >= m) break;
    const float total = warp_sum(acc[i]);
    if (lane == 0) y[std::int64_t(i) * w.rows + r] = total;
  }
}

// One warp per output feature (`up`: null unless kGated).
template <bool kGated>
__global__ void gemv_kernel(DeviceMatrix w, const float* __restrict__ x, const float* __restrict__ up, int m,
                            float* __restrict__ y) {
  const std::int64_t r = std::int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (r < w.rows) gemv_row<kGated>(w, r, threadIdx.x % 32, x, up, m, y);
}

struct TargetGroup {
  MatmulTarget targets[kMaxGroupedMatrices];
  int count;
};

// One warp per output feature of the group: the features of targets[0], then [1], ...
__global__ void gemv_group_kernel(TargetGroup group, const float* __restrict__ x, int m) {
  std::int64_t r = std::int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  for (int t = 0; t < group.count; ++t) {
    const MatmulTarget& target = group.targets[t];
    if (r < target.w.rows) return gemv_row<false>(target.w, r, threadIdx.x % 32, x, nullptr, m, target.y);
    r -= target.w.rows;
  }
}

// The tensor-core GEMM: a block of kGemmWarps warps takes kGemmTileRows output features
// (16 per warp) and all m <= 16 kFragments activation rows (one 16-wide accumulator
// fragment per 16 rows), and walks the inner dimension kGemmDepth values (4 quant blocks)
// a stage: the stage's weight blocks are dequantized to f16 in shared memory (two per
// thread), the activations' f16 values copied beside them in 128-bit loads, then each
// warp multiplies its 16 rows by every fragment of activations in 16x16x16 WMMA steps
// (f16 products, f32 sums). Past the last row or block the tiles hold zeros. The weights
// are read and dequantized once per call, however many rows. Instantiated for 64 and
// kQuantizedGemmMaxRows rows (the accumulators are registers: a 64-row product does not
// pay for 128).
constexpr int kGemmWarps = 2;
constexpr int kGemmTileRows = 16 * kGemmWarps;
constexpr int kGemmDepth = 128;
constexpr int kGemmLd = kGemmDepth + 8;  // halves a tile row: 272 bytes, a multiple of 16
constexpr int kGemmThreads = 32 * kGemmWarps;

// A stage's tiles, then the block's results in the activations' place; WMMA pointers
// must be 256-bit aligned (every tile size here is a multiple of 32 bytes).
template <int kFragments>
struct alignas(32) GemmShared {
  static constexpr int kRows = 16 * kFragments;
  __half weights[kGemmTileRows * kGemmLd];
  union {
    __half acts[kRows * kGemmLd];      // during the stages
    float out[kGemmTileRows * kRows];  // after the last
  };
};
static_assert(sizeof(GemmShared<kQuantizedGemmMaxRows / 16>) <= 48 * 1024, "static shared memory of a block");

template <int kFragments>
__global__ void gemm_quantized_kernel(DeviceMatrix w, const __half* __restrict__ x, int m, float* __restrict__ y) {
  namespace wmma = nvcuda::wmma;
  constexpr int kRows = GemmShared<kFragments>::kRows;
  __shared__ GemmShared<kFragments> shared;
  __half* weights = shared.weights;
  __half* acts = shared.acts;
  const int warp = threadIdx.x / 32, tid = threadIdx.x, fragments = (m + 15) / 16;
  const std::int64_t row0 = std::int64_t(blockIdx.x) * kGemmTileRows, num_blocks = w.cols / 32;
  // A chunk: 8 halves, one 128-bit load; 4 of them a quant block.
  constexpr int kBlocksPerStage = kGemmDepth / 32, kChunksPerRow = kGemmDepth / 8, kChunksPerBlock = 4;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kFragments];
#pragma unroll
  for (int j = 0; j < kFragments; ++j) wmma::fill_fragment(acc[j], 0.f);
  for (std::int64_t b0 = 0; b0 < num_blocks; b0 += kBlocksPerStage) {
    for (int e = tid; e < kGemmTileRows * kBlocksPerStage; e += kGemmThreads) {
      const int r = e / kBlocksPerStage, k = e % kBlocksPerStage;
      float v[32] = {};
      if (row0 + r < w.rows && b0 + k < num_blocks) dequantize_block(w, row0 + r, b0 + k, v);
      __half* dst = weights + r * kGemmLd + k * 32;
#pragma unroll
      for (int j = 0; j < 32; ++j) dst[j] = __float2half_rn(v[j]);
    }
    for (int e = tid; e < fragments * 16 * kChunksPerRow; e += kGemmThreads) {  // rows the fragments read
      const int i = e / kChunksPerRow, chunk = e % kChunksPerRow;
      uint4 v = {0u, 0u, 0u, 0u};
      if (i < m && b0 + chunk / kChunksPerBlock < num_blocks)
        v = *reinterpret_cast<const uint4*>(x + std::int64_t(i) * w.cols + b0 * 32 + chunk * 8);
      *reinterpret_cast<uint4*>(acts + i * kGemmLd + chunk * 8) = v;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kGemmDepth; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
      wmma::load_matrix_sync(a, weights + warp * 16 * kGemmLd + kk, kGemmLd);
#pragma unroll
      for (int j = 0; j < kFragments; ++j) {
        if (j >= fragments) break;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> b;
        wmma::load_matrix_sync(b, acts + j * 16 * kGemmLd + kk, kGemmLd);
        wmma::mma_sync(acc[j], a, b, acc[j]);
      }
    }
    __syncthreads();  // the stage read by every warp (and, after the last, acts free for out)
  }
  float* out = shared.out;
#pragma unroll
  for (int j = 0; j < kFragments; ++j)
    if (j < fragments) wmma::store_matrix_sync(out + warp * 16 * kRows + j * 16, acc[j], kRows, wmma::mem_row_major);
  __syncthreads();
  for (int e = tid; e < kGemmTileRows * m; e += kGemmThreads) {
    const int i = e / kGemmTileRows, r = e % kGemmTileRows;  // r fastest: contiguous writes of y's row i
    if (row0 + r < w.rows) y[std::int64_t(i) * w.rows + row0 + r] = out[r * kRows + i];
  }
}

// One thread per (row, block): 32 f16 values out.
__global__ void dequantize_rows_half_kernel(DeviceMatrix w, std::int64_t row_begin, std::int64_t num_rows,
                                            __half* __restrict__ out) {
  const std::int64_t num_blocks = w.cols / 32;
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= num_rows * num_blocks) return;
  const std::int64_t r = i / num_blocks, b = i % num_blocks;
  float v[32];
  dequantize_block(w, row_begin + r, b, v);
  __half* dst = out + r * w.cols + b * 32;
#pragma unroll
  for (int j = 0; j < 32; ++j) dst[j] = __float2half_rn(v[j]);
}

__global__ void to_half_saturated_kernel(const float* __restrict__ x, std::int64_t n, __half* __restrict__ out) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(fminf(fmaxf(x[i], -65504.f), 65504.f));
}

}  // namespace

// One warp per weight row, kWarpsPerBlock rows a block; `up` null: plain, else gated.
void gemv_quantized_gated(const DeviceMatrix& w, const float* gate, const float* up, int m, float* y,
                          cudaStream_t stream) {
  const unsigned grid = unsigned((w.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  // (a template-id before <<< would not survive the emulator's rewrite)
  auto* kernel = up == nullptr ? &gemv_kernel<false> : &gemv_kernel<true>;
  kernel<<<grid, kWarpsPerBlock * 32, 0, stream>>>(w, gate, up, m, y);
}

void gemv_quantized(const DeviceMatrix& w, const float* x, int m, float* y, cudaStream_t stream) {
  gemv_quantized_gated(w, x, nullptr, m, y, stream);
}

void gemv_quantized_group(const MatmulTarget* targets, int count, const float* x, int m, cudaStream_t stream) {
  TargetGroup group{};
  group.count = count;
  std::int64_t rows = 0;
  for (int t = 0; t < count; ++t) {
    group.targets[t] = targets[t];
    rows += targets[t].w.rows;
  }
  const unsigned grid = unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  if (grid > 0) gemv_group_kernel<<<grid, kWarpsPerBlock * 32, 0, stream>>>(group, x, m);
}

void gemm_quantized(const DeviceMatrix& w, const __half* x, int m, float* y, cudaStream_t stream) {
  const unsigned grid = unsigned((w.rows + kGemmTileRows - 1) / kGemmTileRows);
  auto* kernel = m <= 64 ? &gemm_quantized_kernel<4> : &gemm_quantized_kernel<kQuantizedGemmMaxRows / 16>;
  if (grid > 0 && m > 0) kernel<<<grid, kGemmThreads, 0, stream>>>(w, x, m, y);
}

void dequantize_rows_half(const DeviceMatrix& w, std::int64_t row_begin, std::int64_t row_end, __half* out,
                          cudaStream_t stream) {
  const std::int64_t n = (row_end - row_begin) * (w.cols / 32);
  if (n <= 0) return;
  const int threads = 256;
  dequantize_rows_half_kernel<<<unsigned((n + threads - 1) / threads), threads, 0, stream>>>(
      w, row_begin, row_end - row_begin, out);
}

void to_half_saturated(const float* x, std::int64_t n, __half* out, cudaStream_t stream) {
  if (n <= 0) return;
  const int threads = 256;
  to_half_saturated_kernel<<<unsigned((n + threads - 1) / threads), threads, 0, stream>>>(x, n, out);
}

}  // namespace arbor::kernels::cuda

// Quantized GEMV, tensor-core GEMM and row dequantization (see matmul.hpp).
#include <mma.h>

#include "kernels/cuda/device.hpp"
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/quant.cuh"

namespace arbor::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
// Blocks a lane loads before it uses any: 64 bytes of quants (4 Q4 blocks, 2 Q8_0), so
// with 32 lanes 2.3 KB of a Q4_0 row in flight per warp, where one block a lane left a
// warp waiting a memory latency per 32 blocks (a 4096-wide row took four such waits).
template <GgmlType kType>
constexpr int kGemvUnroll = 64 / int(block_planes(kType).quant_bytes);

// Adds block b of a weight row times each of the m <= kRows f32 activation rows to
// acc[i]: the block turned into its 32 values once (block_values), then multiplied
// with each row's 32 values (eight 128-bit loads; x is 16-byte aligned: a device
// buffer, rows of a multiple of 32 floats).
template <GgmlType kType, int kRows>
__device__ __forceinline__ void accumulate_block(const QuantBlock<kType>& block, const float* __restrict__ x,
                                                 std::int64_t cols, std::int64_t b, int m, float (&acc)[kRows]) {
  float v[32];
  block_values(block, v);
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    if (i >= m) break;
    const auto* xb = reinterpret_cast<const float4*>(x + std::int64_t(i) * cols + b * 32);
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float4 x4 = xb[j];
      s = fmaf(v[4 * j], x4.x, s);
      s = fmaf(v[4 * j + 1], x4.y, s);
      s = fmaf(v[4 * j + 2], x4.z, s);
      s = fmaf(v[4 * j + 3], x4.w, s);
    }
    acc[i] += s;
  }
}

// The same with int8 activations (Q8Activations): the block's quants times the row's,
// four products a __dp4a, summed exactly in an int; then the scales:
//   Q8_0: dw dx sum(qw qx);  Q4_0: dw (dx sum(qw qx) - 8 dx sum(qx));
//   Q4_1: dw dx sum(qw qx) + mw dx sum(qx)   (Q4 quants are 0..15: positive int8s).
// About 20 instructions a Q4_0 block and row against about 100 (a float per quant).
template <GgmlType kType, int kRows>
__device__ __forceinline__ void accumulate_block(const QuantBlock<kType>& block, Q8Activations x, std::int64_t cols,
                                                 std::int64_t b, int m, float (&acc)[kRows]) {
#pragma unroll
  for (int i = 0; i < kRows; ++i) {
    if (i >= m) break;
    const std::int64_t xblock = std::int64_t(i) * (cols / 32) + b;
    const auto* xq = reinterpret_cast<const uint4*>(x.q + xblock * 32);  // values 0-15, 16-31
    const uint4 low = xq[0], high = xq[1];
    const float dx = x.ds[2 * xblock], dx_sum = x.ds[2 * xblock + 1];
    int dot = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if constexpr (kType == GgmlType::Q8_0) {
        dot = __dp4a(int(word_of(block.q[0], k)), int(word_of(low, k)), dot);
        dot = __dp4a(int(word_of(block.q[1], k)), int(word_of(high, k)), dot);
      } else {
        // Byte j of the quants: value j in its low nibble, value j + 16 in its high one.
        const unsigned word = word_of(block.q[0], k);
        dot = __dp4a(int(word & 0x0F0F0F0Fu), int(word_of(low, k)), dot);
        dot = __dp4a(int((word >> 4) & 0x0F0F0F0Fu), int(word_of(high, k)), dot);
      }
    }
    if constexpr (kType == GgmlType::Q8_0) acc[i] += block.d * dx * float(dot);
    if constexpr (kType == GgmlType::Q4_0) acc[i] += block.d * (dx * float(dot) - 8.f * dx_sum);
    if constexpr (kType == GgmlType::Q4_1) acc[i] += block.d * dx * float(dot) + block.m * dx_sum;
  }
}

// Lane `lane`'s share of row r of w times the m <= kRows activation rows (f32 or int8,
// X), added to acc[i]: blocks lane, lane + 32, ..., kGemvUnroll of them loaded at a
// time, then each multiplied with the rows (accumulate_block).
template <GgmlType kType, int kRows, class X>
__device__ void gemv_partial(const DeviceMatrix& w, std::int64_t r, int lane, X x, int m, float (&acc)[kRows]) {
  const std::int64_t num_blocks = w.cols / 32, first = r * num_blocks;
  constexpr int kUnroll = kGemvUnroll<kType>;
  for (std::int64_t b0 = lane; b0 < num_blocks; b0 += 32 * kUnroll) {
    QuantBlock<kType> blocks[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (b0 + 32 * u < num_blocks) blocks[u] = load_quant_block<kType>(w, first + b0 + 32 * u);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::int64_t b = b0 + 32 * u;
      if (b >= num_blocks) break;
      accumulate_block<kType, kRows>(blocks[u], x, w.cols, b, m, acc);
    }
  }
}

// Row r of w times the m activation rows, summed over the warp: every lane gets
// out[i]. The type is dispatched once per row (warp-uniform).
template <int kRows, class X>
__device__ void gemv_dot(const DeviceMatrix& w, std::int64_t r, int lane, X x, int m, float (&out)[kRows]) {
  float acc[kRows] = {};
  switch (w.type) {
    case GgmlType::Q4_0: gemv_partial<GgmlType::Q4_0, kRows>(w, r, lane, x, m, acc); break;
    case GgmlType::Q4_1: gemv_partial<GgmlType::Q4_1, kRows>(w, r, lane, x, m, acc); break;
    default: gemv_partial<GgmlType::Q8_0, kRows>(w, r, lane, x, m, acc); break;
  }
#pragma unroll
  for (int i = 0; i < kRows; ++i) out[i] = i < m ? warp_sum(acc[i]) : 0.f;
}

template <int kRows, class X>
__device__ void gemv_row(const DeviceMatrix& w, std::int64_t r, int lane, X x, int m, float* __restrict__ y) {
  float dot[kRows];
  gemv_dot<kRows>(w, r, lane, x, m, dot);
#pragma unroll
  for (int i = 0; i < kRows; ++i)
    if (i < m && lane == 0) y[std::int64_t(i) * w.rows + r] = dot[i];
}

// Each kernel comes in instances for up to 1, 2, 4 and 8 (kGemvMaxRows) activation rows:
// the accumulators and activations of kRows rows are registers, so a batch-1 step's
// instance needs the fewest (64 a thread on sm_90 against ~126 for 8 rows) and twice
// the warps fit an SM, each with its loads in flight.
static_assert(kGemvMaxRows == 8, "the instances below cover 1, 2, 4 and 8 rows");
template <class Kernel>
Kernel instance_for(int m, Kernel rows1, Kernel rows2, Kernel rows4, Kernel rows8) {
  return m <= 1 ? rows1 : m <= 2 ? rows2 : m <= 4 ? rows4 : rows8;
}

// One warp per output feature.
template <int kRows, class X>
__global__ void gemv_kernel(DeviceMatrix w, X x, int m, float* __restrict__ y) {
  const std::int64_t r = std::int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (r < w.rows) gemv_row<kRows>(w, r, threadIdx.x % 32, x, m, y);
}

// SwiGLU: one warp per FFN feature r computes row r of gate and of up, then
// out[i][r] = silu(gate) * up, so the gating costs one silu per feature (gating the down
// projection's inputs as it read them cost one per feature per output row: 14,336 x
// 4,096 a token for Llama-3-8B).
template <int kRows, class X>
__global__ void gemv_swiglu_kernel(DeviceMatrix gate, DeviceMatrix up, X x, int m, float* __restrict__ out) {
  const std::int64_t r = std::int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (r >= gate.rows) return;
  const int lane = threadIdx.x % 32;
  float g[kRows], u[kRows];
  gemv_dot<kRows>(gate, r, lane, x, m, g);
  gemv_dot<kRows>(up, r, lane, x, m, u);
#pragma unroll
  for (int i = 0; i < kRows; ++i)
    if (i < m && lane == 0) out[std::int64_t(i) * gate.rows + r] = silu_times(g[i], u[i]);
}

struct TargetGroup {
  MatmulTarget targets[kMaxGroupedMatrices];
  int count;
};

// One warp per output feature of the group: the features of targets[0], then [1], ...
// The target is picked by constant indices (a run-time index copies the group to local
// memory, and costs registers).
template <int kRows, class X>
__global__ void gemv_group_kernel(TargetGroup group, X x, int m) {
  std::int64_t r = std::int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  MatmulTarget target = group.targets[0];
#pragma unroll
  for (int t = 1; t < kMaxGroupedMatrices; ++t) {
    if (t < group.count && r >= target.w.rows) {
      r -= target.w.rows;
      target = group.targets[t];
    }
  }
  if (r < target.w.rows) gemv_row<kRows>(target.w, r, threadIdx.x % 32, x, m, target.y);
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
static_assert(sizeof(GemmShared<kQuantizedGemmMaxRows / 16>) <= kMaxStaticSharedBytes, "static shared memory of a block");
constexpr int kGemmSmallFragments = 4;  // the smaller instance: up to 64 rows

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

// One warp per 32 activations: d = max |x| / 127, q = x / d rounded to nearest (in
// [-127, 127]; a NaN block's d is NaN, so its products are too), and d * sum(q).
__global__ void quantize_q8_kernel(const float* __restrict__ x, std::int64_t num_blocks, std::int8_t* __restrict__ q,
                                   float* __restrict__ ds) {
  const std::int64_t b = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (b >= num_blocks) return;  // warp-uniform
  const int lane = threadIdx.x % 32;
  const float v = x[b * 32 + lane];
  const float d = warp_max(fabsf(v)) / 127.f;
  const float rounded = d > 0.f ? fminf(fmaxf(rintf(v / d), -127.f), 127.f) : 0.f;
  q[b * 32 + lane] = static_cast<std::int8_t>(rounded);
  const float sum = warp_sum(rounded);
  if (lane == 0) {
    ds[2 * b] = d;
    ds[2 * b + 1] = d * sum;
  }
}

__global__ void to_half_saturated_kernel(const float* __restrict__ x, std::int64_t n, __half* __restrict__ out) {
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(fminf(fmaxf(x[i], -65504.f), 65504.f));
}

template <class X>
void launch_gemv(const DeviceMatrix& w, X x, int m, float* y, cudaStream_t stream) {
  const unsigned grid = unsigned((w.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  // (a template-id before <<< would not survive the emulator's rewrite)
  auto* kernel = instance_for(m, &gemv_kernel<1, X>, &gemv_kernel<2, X>, &gemv_kernel<4, X>, &gemv_kernel<8, X>);
  if (grid > 0) kernel<<<grid, kWarpsPerBlock * 32, 0, stream>>>(w, x, m, y);
}

template <class X>
void launch_gemv_swiglu(const DeviceMatrix& gate, const DeviceMatrix& up, X x, int m, float* out,
                        cudaStream_t stream) {
  const unsigned grid = unsigned((gate.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  auto* kernel = instance_for(m, &gemv_swiglu_kernel<1, X>, &gemv_swiglu_kernel<2, X>, &gemv_swiglu_kernel<4, X>,
                              &gemv_swiglu_kernel<8, X>);
  if (grid > 0) kernel<<<grid, kWarpsPerBlock * 32, 0, stream>>>(gate, up, x, m, out);
}

template <class X>
void launch_gemv_group(const MatmulTarget* targets, int count, X x, int m, cudaStream_t stream) {
  TargetGroup group{};
  group.count = count;
  std::int64_t rows = 0;
  for (int t = 0; t < count; ++t) {
    group.targets[t] = targets[t];
    rows += targets[t].w.rows;
  }
  const unsigned grid = unsigned((rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  auto* kernel = instance_for(m, &gemv_group_kernel<1, X>, &gemv_group_kernel<2, X>, &gemv_group_kernel<4, X>,
                              &gemv_group_kernel<8, X>);
  if (grid > 0) kernel<<<grid, kWarpsPerBlock * 32, 0, stream>>>(group, x, m);
}

}  // namespace

void gemv_quantized(const DeviceMatrix& w, const float* x, int m, float* y, cudaStream_t stream) {
  launch_gemv(w, x, m, y, stream);
}
void gemv_quantized(const DeviceMatrix& w, Q8Activations x, int m, float* y, cudaStream_t stream) {
  launch_gemv(w, x, m, y, stream);
}

void gemv_quantized_swiglu(const DeviceMatrix& gate, const DeviceMatrix& up, const float* x, int m, float* out,
                           cudaStream_t stream) {
  launch_gemv_swiglu(gate, up, x, m, out, stream);
}
void gemv_quantized_swiglu(const DeviceMatrix& gate, const DeviceMatrix& up, Q8Activations x, int m, float* out,
                           cudaStream_t stream) {
  launch_gemv_swiglu(gate, up, x, m, out, stream);
}

void gemv_quantized_group(const MatmulTarget* targets, int count, const float* x, int m, cudaStream_t stream) {
  launch_gemv_group(targets, count, x, m, stream);
}
void gemv_quantized_group(const MatmulTarget* targets, int count, Q8Activations x, int m, cudaStream_t stream) {
  launch_gemv_group(targets, count, x, m, stream);
}

void quantize_activations_q8(const float* x, std::int64_t n, std::int8_t* q, float* ds, cudaStream_t stream) {
  const std::int64_t blocks = n / 32;
  const int threads = kWarpsPerBlock * 32;
  if (blocks > 0)
    quantize_q8_kernel<<<unsigned((blocks + kWarpsPerBlock - 1) / kWarpsPerBlock), threads, 0, stream>>>(x, blocks, q,
                                                                                                          ds);
}

void gemm_quantized(const DeviceMatrix& w, const __half* x, int m, float* y, cudaStream_t stream) {
  const unsigned grid = unsigned((w.rows + kGemmTileRows - 1) / kGemmTileRows);
  auto* kernel = m <= 16 * kGemmSmallFragments ? &gemm_quantized_kernel<kGemmSmallFragments>
                                               : &gemm_quantized_kernel<kQuantizedGemmMaxRows / 16>;
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

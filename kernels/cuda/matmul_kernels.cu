// Quantized GEMV and row dequantization (see matmul.hpp).
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/quant.cuh"

namespace arbor::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// Output feature r of w for the m activation rows: lane l takes blocks l, l + 32, ...
// (a warp's 32 lanes read 32 consecutive blocks' quants, 512 or 1024 contiguous bytes, in
// 128-bit loads); each block is dequantized once and multiplied with the m rows, whose 32
// values it reads in eight 128-bit loads (x is 16-byte aligned: a device buffer, rows of a
// multiple of 32 floats); then a warp reduction.
__device__ void gemv_row(const DeviceMatrix& w, std::int64_t r, int lane, const float* __restrict__ x, int m,
                         float* __restrict__ y) {
  const std::int64_t num_blocks = w.cols / 32;
  float acc[kGemvMaxRows] = {};
  float v[32];
  for (std::int64_t b = lane; b < num_blocks; b += 32) {
    dequantize_block(w, r, b, v);
#pragma unroll
    for (int i = 0; i < kGemvMaxRows; ++i) {
      if (i >= m) break;
      const auto* xb = reinterpret_cast<const float4*>(x + std::int64_t(i) * w.cols + b * 32);
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
#pragma unroll
  for (int i = 0; i < kGemvMaxRows; ++i) {
    if (i >= m) break;
    const float total = warp_sum(acc[i]);
    if (lane == 0) y[std::int64_t(i) * w.rows + r] = total;
  }
}

// One warp per output feature.
__global__ void gemv_kernel(DeviceMatrix w, const float* __restrict__ x, int m, float* __restrict__ y) {
  const std::int64_t r = std::int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (r < w.rows) gemv_row(w, r, threadIdx.x % 32, x, m, y);
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
    if (r < target.w.rows) return gemv_row(target.w, r, threadIdx.x % 32, x, m, target.y);
    r -= target.w.rows;
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

void gemv_quantized(const DeviceMatrix& w, const float* x, int m, float* y, cudaStream_t stream) {
  const unsigned grid = unsigned((w.rows + kWarpsPerBlock - 1) / kWarpsPerBlock);
  gemv_kernel<<<grid, kWarpsPerBlock * 32, 0, stream>>>(w, x, m, y);
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

// Quantized GEMV and row dequantization (see matmul.hpp).
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/quant.cuh"

namespace arbor::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// Output feature r of w for the m activation rows: lane l takes blocks l, l + 32, ...;
// each block is dequantized once and multiplied with the m rows; then a warp reduction.
__device__ void gemv_row(const DeviceMatrix& w, std::int64_t r, int lane, const float* __restrict__ x, int m,
                         float* __restrict__ y) {
  const std::int64_t num_blocks = w.cols / 32;
  const std::uint8_t* row = static_cast<const std::uint8_t*>(w.data) + r * (num_blocks * bytes_per_32(w.type));
  float acc[kGemvMaxRows] = {};
  float v[32];
  for (std::int64_t b = lane; b < num_blocks; b += 32) {
    dequantize_block(w.type, row, b, v);
#pragma unroll
    for (int i = 0; i < kGemvMaxRows; ++i) {
      if (i >= m) break;
      const float* xb = x + std::int64_t(i) * w.cols + b * 32;
      float s = 0.f;
#pragma unroll
      for (int j = 0; j < 32; ++j) s = fmaf(v[j], xb[j], s);
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

// One thread per (row, block): 32 floats out.
__global__ void dequantize_rows_kernel(DeviceMatrix w, std::int64_t row_begin, std::int64_t num_rows,
                                       float* __restrict__ out) {
  const std::int64_t num_blocks = w.cols / 32;
  const std::int64_t i = std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= num_rows * num_blocks) return;
  const std::int64_t r = i / num_blocks, b = i % num_blocks;
  const std::uint8_t* row =
      static_cast<const std::uint8_t*>(w.data) + (row_begin + r) * (num_blocks * bytes_per_32(w.type));
  float v[32];
  dequantize_block(w.type, row, b, v);
  float* dst = out + r * w.cols + b * 32;
#pragma unroll
  for (int j = 0; j < 32; ++j) dst[j] = v[j];
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

void dequantize_rows(const DeviceMatrix& w, std::int64_t row_begin, std::int64_t row_end, float* out,
                     cudaStream_t stream) {
  const std::int64_t n = (row_end - row_begin) * (w.cols / 32);
  if (n <= 0) return;
  const int threads = 256;
  dequantize_rows_kernel<<<unsigned((n + threads - 1) / threads), threads, 0, stream>>>(w, row_begin,
                                                                                      row_end - row_begin, out);
}

}  // namespace arbor::kernels::cuda

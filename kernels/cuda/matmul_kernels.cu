// Quantized GEMV and row dequantization (see matmul.hpp).
#include "kernels/cuda/matmul.hpp"
#include "kernels/cuda/quant.cuh"

namespace arbor::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// One warp per output feature r: lane l takes blocks l, l + 32, ...; each block is
// dequantized once and multiplied with the m activation rows; then a warp reduction.
__global__ void gemv_kernel(DeviceMatrix w, const float* __restrict__ x, int m, float* __restrict__ y) {
  const std::int64_t r = std::int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (r >= w.rows) return;
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

void dequantize_rows(const DeviceMatrix& w, std::int64_t row_begin, std::int64_t row_end, float* out,
                     cudaStream_t stream) {
  const std::int64_t n = (row_end - row_begin) * (w.cols / 32);
  if (n <= 0) return;
  const int threads = 256;
  dequantize_rows_kernel<<<unsigned((n + threads - 1) / threads), threads, 0, stream>>>(w, row_begin,
                                                                                      row_end - row_begin, out);
}

}  // namespace arbor::kernels::cuda

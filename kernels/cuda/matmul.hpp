// y = x * W^T on a CUDA device, for every device weight type:
//  - F32 weights: cuBLAS SGEMM (FP32 math; no TF32, so results match the CPU's f32 path).
//  - Q4_0/Q4_1/Q8_0 with m <= kGemvMaxRows activation rows (decode): a GEMV kernel that
//    dequantizes each weight block in registers and accumulates in f32; one warp per
//    output feature, all m rows at once (the weights are read once per step).
//  - Q4_0/Q4_1/Q8_0 with more rows (prefill): tiles of weight rows are dequantized to
//    f32 in a scratch buffer, then cuBLAS SGEMM on each tile.
//  - A group of matrices applied to the same activations (Q, K, V; gate, up): one GEMV
//    launch for all of them when each is quantized and m <= kGemvMaxRows, else one run
//    each; the outputs are the same either way.
// Activations stay f32 throughout (the CPU's int8 activation quantization does not
// apply), so the result is the f32 reference product up to summation order.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cuda/buffer.hpp"
#include "kernels/cuda/device_matrix.hpp"

namespace arbor::kernels::cuda {

inline constexpr int kGemvMaxRows = 8;
inline constexpr int kMaxGroupedMatrices = 3;

// One matrix of a group and where its product goes: y [m][w.rows].
struct MatmulTarget {
  DeviceMatrix w;
  float* y = nullptr;
};

// Kernels (matmul_kernels.cu); asynchronous on `stream`.
// y[i][r] = sum_c x[i][c] * W[r][c] for i < m <= kGemvMaxRows, W quantized.
void gemv_quantized(const DeviceMatrix& w, const float* x, int m, float* y, cudaStream_t stream);
// The same for `count` <= kMaxGroupedMatrices quantized matrices of one width, in one
// launch: each output row is computed exactly as gemv_quantized computes it.
void gemv_quantized_group(const MatmulTarget* targets, int count, const float* x, int m, cudaStream_t stream);
// out[r - row_begin][c] = W[r][c] as f32, for r in [row_begin, row_end) (W quantized or F32).
void dequantize_rows(const DeviceMatrix& w, std::int64_t row_begin, std::int64_t row_end, float* out,
                     cudaStream_t stream);

// The most device memory the dequantization scratch of a Matmul takes (one tile of
// weight rows as f32).
inline constexpr std::size_t kMatmulScratchBytes = std::size_t(128) << 20;

// Owns a cuBLAS handle and the dequantization scratch; one per engine (not thread-safe).
class Matmul {
 public:
  Matmul() = default;
  ~Matmul();
  Matmul(const Matmul&) = delete;
  Matmul& operator=(const Matmul&) = delete;

  // Creates the cuBLAS handle on the current device, bound to `stream`.
  bool init(cudaStream_t stream, std::string* error);
  // y: [m][w.rows], x: [m][w.cols] (f32, device, y must not alias x). False with `error`
  // when cuBLAS or the scratch allocation fails.
  bool run(const DeviceMatrix& w, const float* x, std::int64_t m, float* y, std::string* error);
  // run() for each target, on the same x (every w of x's width), grouped into one launch
  // where the GEMV applies to all of them.
  // (A pointer and a count: .cu files include this header as C++17, without std::span.)
  bool run_group(const MatmulTarget* targets, int count, const float* x, std::int64_t m, std::string* error);

 private:
  bool sgemm(const float* w, std::int64_t w_rows, std::int64_t cols, const float* x, std::int64_t m, float* y,
             std::int64_t ldy, std::string* error);

  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer scratch_;  // one dequantized tile of weight rows, f32
};

}  // namespace arbor::kernels::cuda

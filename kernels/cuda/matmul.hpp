// y = x * W^T on a CUDA device, for every device weight type:
//  - F32 weights: cuBLAS SGEMM (FP32 math; no TF32, so results match the CPU's f32 path).
//  - Q4_0/Q4_1/Q8_0 with m <= kGemvMaxRows activation rows (decode): a GEMV kernel that
//    multiplies each weight block in registers and accumulates in f32; one warp per
//    output feature, all m rows at once (the weights are read once per step), each lane
//    loading several blocks before it uses any (bytes in flight: decode is bound by them).
//  - Q4_0/Q4_1/Q8_0 with more rows: the activations are rounded to f16 once (beyond
//    f16's range they saturate at +-65504), then
//    - up to kQuantizedGemmMaxRows rows (decode batches): a tensor-core GEMM kernel
//      (WMMA, f16 products, f32 sums) that dequantizes the weights into shared memory
//      stage by stage: the weights are read once, as in the GEMV;
//    - more rows (prefill): tiles of weight rows are dequantized to f16 in a scratch
//      buffer and cuBLAS GemmEx multiplies them (f32 accumulation; llama.cpp's cuBLAS
//      path does the same), the tile's cost spread over many rows.
//  - The FFN's SwiGLU, silu(x Wg^T) * (x Wu^T) (run_swiglu): one GEMV launch computes
//    both products of each feature and gates them (no separate SwiGLU kernel); other
//    paths compute the two products, then gate.
//  - A group of matrices applied to the same activations (Q, K, V; gate, up): one GEMV
//    launch for all of them when each is quantized and m <= kGemvMaxRows, else one matmul
//    each (the f16 activations converted once); the outputs are the same either way.
// The GEMV and SGEMM keep activations f32 by default: the f32 reference product up to
// summation order. The f16 GEMMs are within about 1e-3 of it relative to sum |w| |x|
// (one f16 rounding of each operand). With set_gemv_int8(true) (the engine's precision
// "fast") the GEMV rounds the activations to int8 per 32 values first (Q8Activations,
// as llama.cpp's q8_1 and the CPU's fast path) and multiplies quants with __dp4a: about
// a fifth of the instructions a block, so a GEMV that computes more than it reads may
// become bound by its bytes; its product is the f32 one of the rounded activations.
#pragma once

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/cuda/buffer.hpp"
#include "kernels/cuda/device_matrix.hpp"

namespace arbor::kernels::cuda {

inline constexpr int kGemvMaxRows = 8;
inline constexpr int kQuantizedGemmMaxRows = 128;  // a multiple of 16 (WMMA fragments)
inline constexpr int kMaxGroupedMatrices = 3;

// One matrix of a group and where its product goes: y [m][w.rows].
struct MatmulTarget {
  DeviceMatrix w;
  float* y = nullptr;
};

// Activations rounded to int8 for the GEMV, per block of 32 values of a row: quants
// q [m][cols] and ds [m][cols / 32][2] = {d, d * sum(q)}, the value being q * d with
// d = max |x| / 127 (d * sum(q) serves Q4_0's offset and Q4_1's minimum).
struct Q8Activations {
  const std::int8_t* q = nullptr;  // 16-byte aligned
  const float* ds = nullptr;
};

// Kernels (matmul_kernels.cu); asynchronous on `stream`.
// y[i][r] = sum_c x[i][c] * W[r][c] for i < m <= kGemvMaxRows, W quantized.
void gemv_quantized(const DeviceMatrix& w, const float* x, int m, float* y, cudaStream_t stream);
void gemv_quantized(const DeviceMatrix& w, Q8Activations x, int m, float* y, cudaStream_t stream);
// out[i][r] = silu(x[i] . gate[r]) * (x[i] . up[r]) for i < m <= kGemvMaxRows, gate and
// up quantized, of one shape.
void gemv_quantized_swiglu(const DeviceMatrix& gate, const DeviceMatrix& up, const float* x, int m, float* out,
                           cudaStream_t stream);
void gemv_quantized_swiglu(const DeviceMatrix& gate, const DeviceMatrix& up, Q8Activations x, int m, float* out,
                           cudaStream_t stream);
// The same for `count` <= kMaxGroupedMatrices quantized matrices of one width, in one
// launch: each output row is computed exactly as gemv_quantized computes it.
void gemv_quantized_group(const MatmulTarget* targets, int count, const float* x, int m, cudaStream_t stream);
void gemv_quantized_group(const MatmulTarget* targets, int count, Q8Activations x, int m, cudaStream_t stream);
// x [n] (n a multiple of 32, rows of a multiple of 32 values) rounded to int8 into q [n]
// and ds [n / 32][2] (Q8Activations).
void quantize_activations_q8(const float* x, std::int64_t n, std::int8_t* q, float* ds, cudaStream_t stream);
// y[i][r] = sum_c x[i][c] * W[r][c] for i < m <= kQuantizedGemmMaxRows, W quantized, x
// f16 (16-byte aligned rows), on the tensor cores.
void gemm_quantized(const DeviceMatrix& w, const __half* x, int m, float* y, cudaStream_t stream);
// out[r - row_begin][c] = W[r][c] rounded to f16, for r in [row_begin, row_end) (W
// quantized: every value is q * d of an f16 scale d, well inside f16's range).
void dequantize_rows_half(const DeviceMatrix& w, std::int64_t row_begin, std::int64_t row_end, __half* out,
                          cudaStream_t stream);
// out[i] = x[i] rounded to f16 for i < n, saturated at +-65504 (f16's largest finite
// value) so that no activation becomes an infinity.
void to_half_saturated(const float* x, std::int64_t n, __half* out, cudaStream_t stream);

// The most device memory the weight-tile scratch of a Matmul takes (one tile of weight
// rows as f16).
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
  // y: [m][w.rows], x: [m][w.cols] (f32, device, 16-byte aligned as device buffers are;
  // y must not alias x). False with `error` when x is misaligned, or cuBLAS or the scratch
  // allocation fails.
  bool run(const DeviceMatrix& w, const float* x, std::int64_t m, float* y, std::string* error);
  // run() for each target, on the same x (every w of x's width), grouped into one launch
  // where the GEMV applies to all of them.
  // (A pointer and a count: .cu files include this header as C++17, without std::span.)
  bool run_group(const MatmulTarget* targets, int count, const float* x, std::int64_t m, std::string* error);
  // out [m][gate.rows] = silu(x * gate^T) * (x * up^T), the FFN's SwiGLU (gate and up of
  // one shape): one GEMV launch where it applies to both, else the two products
  // (run_group; up's into `up_scratch`, of out's size) and the gating.
  bool run_swiglu(const DeviceMatrix& gate, const DeviceMatrix& up, const float* x, std::int64_t m, float* out,
                  float* up_scratch, std::string* error);

  // Products of at most this many activation rows take the GEMV (kGemvMaxRows by
  // default; 0: none, every quantized product takes the tensor-core GEMM or cuBLAS). To
  // measure where the GEMV should hand over (ARBOR_CUDA_GEMV_MAX_ROWS in the engine).
  void set_gemv_max_rows(int rows) { gemv_max_rows_ = rows < 0 ? 0 : rows > kGemvMaxRows ? kGemvMaxRows : rows; }
  int gemv_max_rows() const { return gemv_max_rows_; }
  // Whether the GEMV rounds the activations to int8 (Q8Activations) first; off by default.
  void set_gemv_int8(bool on) { gemv_int8_ = on; }
  bool gemv_int8() const { return gemv_int8_; }

  // Whether run() / run_group() of `m` rows on `w` only launches kernels: no cuBLAS call
  // (F32 weights, prefill-sized GEMMs), which a CUDA graph capture may not hold.
  static bool kernels_only(const DeviceMatrix& w, std::int64_t m) {
    return w.type != GgmlType::F32 && m <= kQuantizedGemmMaxRows;
  }
  // Grows the activation scratch (f16; int8 too when the GEMV takes int8) for `m` rows of
  // up to `cols` columns now, so that products of that size allocate nothing (as a
  // capture requires).
  bool reserve_activations(std::int64_t m, std::int64_t cols, std::string* error) {
    return x_half_.reserve(std::size_t(m * cols) * sizeof(__half), error) &&
           (!gemv_int8_ || x_q8_.reserve(q8_bytes(std::min<std::int64_t>(m, kGemvMaxRows), cols), error));
  }

  // Where the f16 activations go (a kernel argument of the GEMVs of more than one row).
  const void* activation_scratch() const { return x_half_.data(); }

  // The most device memory a Matmul's scratch takes for products of up to `max_rows`
  // activation rows of up to `max_cols` columns.
  static std::size_t scratch_bytes(std::int64_t max_rows, std::int64_t max_cols) {
    return kMatmulScratchBytes + std::size_t(max_rows * max_cols) * sizeof(__half) +
           q8_bytes(std::min<std::int64_t>(max_rows, kGemvMaxRows), max_cols);
  }

 private:
  bool sgemm(const float* w, std::int64_t w_rows, std::int64_t cols, const float* x, std::int64_t m, float* y,
             std::int64_t ldy, std::string* error);
  // Q8Activations of m rows of `cols` values: the quants, then the scales.
  static std::size_t q8_bytes(std::int64_t m, std::int64_t cols) {
    return std::size_t(m * cols) + std::size_t(m * cols / 32) * 2 * sizeof(float);
  }
  // x [m][cols] rounded to int8 into x_q8_ (for the GEMV); false with `error` when it
  // cannot be allocated.
  bool activations_to_q8(const float* x, std::int64_t m, std::int64_t cols, Q8Activations* out, std::string* error);
  // launch(activations): x as the GEMV takes it, f32 or (gemv_int8_) rounded to int8 first.
  template <class Launch>
  bool gemv_with(const float* x, std::int64_t m, std::int64_t cols, std::string* error, Launch launch) {
    if (!gemv_int8_) {
      launch(x);
      return true;
    }
    Q8Activations q8;
    if (!activations_to_q8(x, m, cols, &q8, error)) return false;
    launch(q8);
    return true;
  }
  // x [m][cols] rounded to f16 into x_half_; null with `error` when it cannot be allocated.
  const __half* activations_to_half(const float* x, std::int64_t m, std::int64_t cols, std::string* error);
  // y [m][w.rows] = x_half * W^T, W quantized and m past the GEMV: gemm_quantized up to
  // kQuantizedGemmMaxRows rows, else f16 tiles of W and cuBLAS GemmEx.
  bool gemm_half(const DeviceMatrix& w, const __half* x_half, std::int64_t m, float* y, std::string* error);

  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer weight_tile_;  // one dequantized tile of weight rows, f16
  DeviceBuffer x_half_;       // the activations of a GEMM, f16
  DeviceBuffer x_q8_;         // the activations of an int8 GEMV
  int gemv_max_rows_ = kGemvMaxRows;
  bool gemv_int8_ = false;
};

}  // namespace arbor::kernels::cuda

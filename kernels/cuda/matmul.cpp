#include "kernels/cuda/matmul.hpp"

#include <algorithm>

#include "kernels/cuda/ops.hpp"

namespace arbor::kernels::cuda {
namespace {

// f16 values of one dequantized tile of weight rows.
constexpr std::int64_t kTileHalves = std::int64_t(kMatmulScratchBytes / sizeof(__half));

bool cublas_ok(cublasStatus_t s, const char* what, std::string* error) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  if (error) *error = std::string(what) + ": " + cublasGetStatusString(s);
  return false;
}

// The GEMV reads activations 128 bits at a time.
bool aligned_activations(const float* x, std::string* error) {
  if (reinterpret_cast<std::uintptr_t>(x) % 16 == 0) return true;
  if (error) *error = "matmul: activations not 16-byte aligned (pass a device buffer or a row of one)";
  return false;
}

}  // namespace

Matmul::~Matmul() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

bool Matmul::init(cudaStream_t stream, std::string* error) {
  stream_ = stream;
  if (!cublas_ok(cublasCreate(&handle_), "cublasCreate", error)) {
    handle_ = nullptr;
    return false;
  }
  return cublas_ok(cublasSetStream(handle_, stream), "cublasSetStream", error) &&
         cublas_ok(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH), "cublasSetMathMode", error);
}

// Row-major y[m][ldy] (columns [0, w_rows) written) = x[m][cols] * w[w_rows][cols]^T.
// In cuBLAS's column-major terms: y^T (w_rows x m, ld ldy) = w^T (w_rows x cols, stored
// as cols x w_rows with ld cols, hence OP_T) * x^T (cols x m, ld cols).
bool Matmul::sgemm(const float* w, std::int64_t w_rows, std::int64_t cols, const float* x, std::int64_t m, float* y,
                   std::int64_t ldy, std::string* error) {
  const float one = 1.f, zero = 0.f;
  return cublas_ok(cublasSgemm(handle_, CUBLAS_OP_T, CUBLAS_OP_N, int(w_rows), int(m), int(cols), &one, w, int(cols),
                               x, int(cols), &zero, y, int(ldy)),
                   "cublasSgemm", error);
}

// Row-major y[m][w.rows] = x[m][cols] (f16) * W^T: the tensor-core kernel, or per tile
// of W dequantized to f16, GemmEx with sgemm()'s transposition (f32 accumulation/output).
bool Matmul::gemm_half(const DeviceMatrix& w, const __half* x_half, std::int64_t m, float* y, std::string* error) {
  if (m <= kQuantizedGemmMaxRows) {
    gemm_quantized(w, x_half, int(m), y, stream_);
    return true;
  }
  const std::int64_t tile = std::clamp<std::int64_t>(kTileHalves / w.cols, 1, w.rows);
  if (!weight_tile_.reserve(std::size_t(tile * w.cols) * sizeof(__half), error)) return false;
  const float one = 1.f, zero = 0.f;
  for (std::int64_t r0 = 0; r0 < w.rows; r0 += tile) {
    const std::int64_t r1 = std::min(w.rows, r0 + tile);
    dequantize_rows_half(w, r0, r1, weight_tile_.as<__half>(), stream_);
    const cublasStatus_t s =
        cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, int(r1 - r0), int(m), int(w.cols), &one,
                     weight_tile_.as<__half>(), CUDA_R_16F, int(w.cols), x_half, CUDA_R_16F, int(w.cols), &zero,
                     y + r0, CUDA_R_32F, int(w.rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (!cublas_ok(s, "cublasGemmEx", error)) return false;
  }
  return true;
}

const __half* Matmul::activations_to_half(const float* x, std::int64_t m, std::int64_t cols, std::string* error) {
  if (!x_half_.reserve(std::size_t(m * cols) * sizeof(__half), error)) return nullptr;
  to_half_saturated(x, m * cols, x_half_.as<__half>(), stream_);
  return x_half_.as<__half>();
}

bool Matmul::activations_to_q8(const float* x, std::int64_t m, std::int64_t cols, Q8Activations* out,
                               std::string* error) {
  if (!x_q8_.reserve(q8_bytes(m, cols), error)) return false;
  auto* q = x_q8_.as<std::int8_t>();
  auto* ds = reinterpret_cast<float*>(q + m * cols);  // cols is a multiple of 32: 4-byte aligned
  quantize_activations_q8(x, m * cols, q, ds, stream_);
  *out = Q8Activations{q, ds};
  return true;
}

bool Matmul::run_group(const MatmulTarget* targets, int count, const float* x, std::int64_t m, std::string* error) {
  if (m <= 0) return true;
  if (!aligned_activations(x, error)) return false;
  const bool quantized = std::all_of(targets, targets + count,
                                     [](const MatmulTarget& t) { return t.w.type != GgmlType::F32; });
  if (quantized && m <= gemv_max_rows_ && count <= kMaxGroupedMatrices) {
    return gemv_with(x, m, targets[0].w.cols, error,
                     [&](auto acts) { gemv_quantized_group(targets, count, acts, int(m), stream_); });
  }
  if (!quantized || m <= gemv_max_rows_) {
    for (int t = 0; t < count; ++t)
      if (!run(targets[t].w, x, m, targets[t].y, error)) return false;
    return true;
  }
  const __half* x_half = activations_to_half(x, m, targets[0].w.cols, error);  // once for the group
  if (x_half == nullptr) return false;
  for (int t = 0; t < count; ++t)
    if (!gemm_half(targets[t].w, x_half, m, targets[t].y, error)) return false;
  return true;
}

bool Matmul::run_swiglu(const DeviceMatrix& gate, const DeviceMatrix& up, const float* x, std::int64_t m, float* out,
                        float* up_scratch, std::string* error) {
  if (m <= 0) return true;
  if (!aligned_activations(x, error)) return false;
  if (gate.type != GgmlType::F32 && up.type != GgmlType::F32 && m <= gemv_max_rows_) {
    return gemv_with(x, m, gate.cols, error,
                     [&](auto acts) { gemv_quantized_swiglu(gate, up, acts, int(m), out, stream_); });
  }
  const MatmulTarget targets[] = {{gate, out}, {up, up_scratch}};
  if (!run_group(targets, 2, x, m, error)) return false;
  silu_mul(out, up_scratch, m * gate.rows, stream_);
  return true;
}

bool Matmul::run(const DeviceMatrix& w, const float* x, std::int64_t m, float* y, std::string* error) {
  if (m <= 0) return true;
  if (!aligned_activations(x, error)) return false;
  if (w.type == GgmlType::F32) return sgemm(static_cast<const float*>(w.data), w.rows, w.cols, x, m, y, w.rows, error);
  if (m <= gemv_max_rows_) {
    return gemv_with(x, m, w.cols, error, [&](auto acts) { gemv_quantized(w, acts, int(m), y, stream_); });
  }
  const __half* x_half = activations_to_half(x, m, w.cols, error);
  return x_half != nullptr && gemm_half(w, x_half, m, y, error);
}

}  // namespace arbor::kernels::cuda

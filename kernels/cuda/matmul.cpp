#include "kernels/cuda/matmul.hpp"

#include <algorithm>

namespace arbor::kernels::cuda {
namespace {

// f32 values of one dequantized tile of weight rows.
constexpr std::int64_t kScratchFloats = std::int64_t(kMatmulScratchBytes / sizeof(float));

bool cublas_ok(cublasStatus_t s, const char* what, std::string* error) {
  if (s == CUBLAS_STATUS_SUCCESS) return true;
  if (error) *error = std::string(what) + ": " + cublasGetStatusString(s);
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

bool Matmul::run_group(const MatmulTarget* targets, int count, const float* x, std::int64_t m, std::string* error) {
  const bool one_launch = m > 0 && m <= kGemvMaxRows && count <= kMaxGroupedMatrices &&
                          std::all_of(targets, targets + count,
                                      [](const MatmulTarget& t) { return t.w.type != GgmlType::F32; });
  if (one_launch) {
    gemv_quantized_group(targets, count, x, int(m), stream_);
    return true;
  }
  for (int t = 0; t < count; ++t)
    if (!run(targets[t].w, x, m, targets[t].y, error)) return false;
  return true;
}

bool Matmul::run(const DeviceMatrix& w, const float* x, std::int64_t m, float* y, std::string* error) {
  if (m <= 0) return true;
  if (w.type == GgmlType::F32) return sgemm(static_cast<const float*>(w.data), w.rows, w.cols, x, m, y, w.rows, error);
  if (m <= kGemvMaxRows) {
    gemv_quantized(w, x, int(m), y, stream_);
    return true;
  }
  const std::int64_t tile = std::clamp<std::int64_t>(kScratchFloats / w.cols, 1, w.rows);
  if (!scratch_.reserve(std::size_t(tile * w.cols) * sizeof(float), error)) return false;
  for (std::int64_t r0 = 0; r0 < w.rows; r0 += tile) {
    const std::int64_t r1 = std::min(w.rows, r0 + tile);
    dequantize_rows(w, r0, r1, scratch_.as<float>(), stream_);
    if (!sgemm(scratch_.as<float>(), r1 - r0, w.cols, x, m, y + r0, w.rows, error)) return false;
  }
  return true;
}

}  // namespace arbor::kernels::cuda

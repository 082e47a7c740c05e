// The emulated cuBLAS: handles and cublasSgemm, with cuBLAS's argument checks (leading
// dimensions, device pointers), so a transposition or stride mistake fails here too.
#include <algorithm>
#include <cstdio>

#include "internal.hpp"

struct cublasContext {
  cudaStream_t stream = nullptr;
  cublasMath_t mode = CUBLAS_DEFAULT_MATH;
};

cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    return CUBLAS_STATUS_NOT_INITIALIZED;
  }
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}

const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

namespace {

// Element (row, col) of a column-major matrix with leading dimension ld.
inline float at(const float* m, int ld, int row, int col) { return m[std::size_t(col) * std::size_t(ld) + row]; }

// op(X) (rows x cols) read from storage with leading dimension ld: its last byte must lie
// in device memory, as the whole operand is read.
bool operand_on_device(const float* p, cublasOperation_t op, int rows, int cols, int ld) {
  const int stored_cols = op == CUBLAS_OP_N ? cols : rows, stored_rows = op == CUBLAS_OP_N ? rows : cols;
  const std::size_t span = (std::size_t(stored_cols) - 1) * std::size_t(ld) + std::size_t(stored_rows);
  return cuda_emulator::is_device_range(p, span * sizeof(float));
}

}  // namespace

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                           const float* beta, float* C, int ldc) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  const int a_rows = transa == CUBLAS_OP_N ? m : k, b_rows = transb == CUBLAS_OP_N ? k : n;
  if (m < 0 || n < 0 || k < 0 || lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  if ((k > 0 && (!operand_on_device(A, transa, m, k, lda) || !operand_on_device(B, transb, k, n, ldb))) ||
      !operand_on_device(C, CUBLAS_OP_N, m, n, ldc)) {
    std::fprintf(stderr, "cuda emulator: cublasSgemm reads or writes outside device memory (m %d n %d k %d, lda %d "
                 "ldb %d ldc %d)\n", m, n, k, lda, ldb, ldc);
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      float sum = 0.f;
      for (int p = 0; p < k; ++p) {
        const float a = transa == CUBLAS_OP_N ? at(A, lda, i, p) : at(A, lda, p, i);
        const float b = transb == CUBLAS_OP_N ? at(B, ldb, p, j) : at(B, ldb, j, p);
        sum += a * b;
      }
      float& c = C[std::size_t(j) * std::size_t(ldc) + i];
      c = *beta == 0.f ? *alpha * sum : *alpha * sum + *beta * c;  // beta 0: C is not read
    }
  return CUBLAS_STATUS_SUCCESS;
}

// The emulated cuBLAS: handles and cublasSgemm, with cuBLAS's argument checks (leading
// dimensions, device pointers), so a transposition or stride mistake fails here too.
#include <algorithm>
#include <cstdio>
#include <thread>
#include <vector>

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

// op(X) (rows x cols) read from storage with leading dimension ld: its last byte must lie
// in device memory, as the whole operand is read.
bool operand_on_device(const float* p, cublasOperation_t op, int rows, int cols, int ld) {
  const int stored_cols = op == CUBLAS_OP_N ? cols : rows, stored_rows = op == CUBLAS_OP_N ? rows : cols;
  const std::size_t span = (std::size_t(stored_cols) - 1) * std::size_t(ld) + std::size_t(stored_rows);
  return cuda_emulator::is_device_range(p, span * sizeof(float));
}

// sum_p a[p * as] b[p * bs], in eight interleaved partial sums (which the compiler can
// keep in one vector register when both strides are 1, the backend's case).
float dot(const float* a, std::ptrdiff_t as, const float* b, std::ptrdiff_t bs, int k) {
  float partial[8] = {};
  int p = 0;
  if (as == 1 && bs == 1) {
    for (; p + 8 <= k; p += 8)
      for (int q = 0; q < 8; ++q) partial[q] += a[p + q] * b[p + q];
  }
  for (; p < k; ++p) partial[p % 8] += a[p * as] * b[p * bs];
  float sum = 0.f;
  for (float x : partial) sum += x;
  return sum;
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
  // op(A)(i, p) = A[i * a_i + p * a_p], op(B)(p, j) = B[p * b_p + j * b_j].
  const std::ptrdiff_t a_i = transa == CUBLAS_OP_N ? 1 : lda, a_p = transa == CUBLAS_OP_N ? lda : 1;
  const std::ptrdiff_t b_p = transb == CUBLAS_OP_N ? 1 : ldb, b_j = transb == CUBLAS_OP_N ? ldb : 1;
  const float al = *alpha, be = *beta;
  auto rows = [&](int i0, int i1) {
    for (int j = 0; j < n; ++j)
      for (int i = i0; i < i1; ++i) {
        const float sum = dot(A + i * a_i, a_p, B + j * b_j, b_p, k);
        float& c = C[std::size_t(j) * std::size_t(ldc) + i];
        c = be == 0.f ? al * sum : al * sum + be * c;  // beta 0: C is not read
      }
  };
  // Rows of C split among the emulator's worker threads, as the grid's blocks are.
  const int workers = int(std::min<unsigned>(cuda_emulator::worker_threads(), unsigned(m)));
  std::vector<std::thread> helpers;
  for (int w = 1; w < workers; ++w) helpers.emplace_back(rows, int(std::int64_t(m) * w / workers),
                                                         int(std::int64_t(m) * (w + 1) / workers));
  rows(0, m / workers);
  for (std::thread& t : helpers) t.join();
  return CUBLAS_STATUS_SUCCESS;
}

// The emulated cuBLAS: handles, cublasSgemm and cublasGemmEx (f32/f16 operands), with
// cuBLAS's argument checks (leading dimensions, device pointers, types), so a
// transposition, stride or type mistake fails here too.
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
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

namespace {

float value(float v) { return v; }
float value(__half v) { return __half2float(v); }

// op(X) (rows x cols) of `element` bytes read from storage with leading dimension ld: its
// last byte must lie in device memory, as the whole operand is read.
bool operand_on_device(const void* p, std::size_t element, cublasOperation_t op, int rows, int cols, int ld) {
  const int stored_cols = op == CUBLAS_OP_N ? cols : rows, stored_rows = op == CUBLAS_OP_N ? rows : cols;
  const std::size_t span = (std::size_t(stored_cols) - 1) * std::size_t(ld) + std::size_t(stored_rows);
  return cuda_emulator::is_device_range(p, span * element);
}

// sum_p a[p] b[p] in f32, in eight interleaved partial sums (which the compiler can keep
// in one vector register).
float dot(const float* a, const float* b, int k) {
  float partial[8] = {};
  int p = 0;
  for (; p + 8 <= k; p += 8)
    for (int q = 0; q < 8; ++q) partial[q] += a[p + q] * b[p + q];
  for (; p < k; ++p) partial[p % 8] += a[p] * b[p];
  float sum = 0.f;
  for (float x : partial) sum += x;
  return sum;
}

// Column-major C (m x n, f32) = alpha op(A) op(B) + beta C, for `name`.
template <class TA, class TB>
cublasStatus_t gemm(const char* name, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                    int m, int n, int k, float al, const TA* A, int lda, const TB* B, int ldb, float be, float* C,
                    int ldc) {
  if (handle == nullptr) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (cuda_emulator::capturing(handle->stream)) {  // cuBLAS may allocate in a capture: not emulated
    cuda_emulator::refuse_in_capture(handle->stream, name);
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const int a_rows = transa == CUBLAS_OP_N ? m : k, b_rows = transb == CUBLAS_OP_N ? k : n;
  if (m < 0 || n < 0 || k < 0 || lda < std::max(1, a_rows) || ldb < std::max(1, b_rows) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
  if ((k > 0 && (!operand_on_device(A, sizeof(TA), transa, m, k, lda) ||
                 !operand_on_device(B, sizeof(TB), transb, k, n, ldb))) ||
      !operand_on_device(C, sizeof(float), CUBLAS_OP_N, m, n, ldc)) {
    std::fprintf(stderr, "cuda emulator: %s reads or writes outside device memory (m %d n %d k %d, lda %d "
                 "ldb %d ldc %d)\n", name, m, n, k, lda, ldb, ldc);
    return CUBLAS_STATUS_EXECUTION_FAILED;
  }
  // Queued on the handle's stream, like a kernel: the operands are read when it runs.
  cuda_emulator::issue(handle->stream, "cublas", [=] {
    // op(A)(i, p) = A[i * a_i + p * a_p], op(B)(p, j) = B[p * b_p + j * b_j].
    const std::ptrdiff_t a_i = transa == CUBLAS_OP_N ? 1 : lda, a_p = transa == CUBLAS_OP_N ? lda : 1;
    const std::ptrdiff_t b_p = transb == CUBLAS_OP_N ? 1 : ldb, b_j = transb == CUBLAS_OP_N ? ldb : 1;
    // op(B) as f32 columns (b_cols[j * k + p]), converted once; op(A) a row at a time.
    std::vector<float> b_cols(std::size_t(n) * std::size_t(k));
    for (int j = 0; j < n; ++j)
      for (int p = 0; p < k; ++p) b_cols[std::size_t(j) * std::size_t(k) + p] = value(B[p * b_p + j * b_j]);
    auto rows = [&](int i0, int i1) {
      std::vector<float> a_row(static_cast<std::size_t>(k));
      for (int i = i0; i < i1; ++i) {
        for (int p = 0; p < k; ++p) a_row[std::size_t(p)] = value(A[i * a_i + p * a_p]);
        for (int j = 0; j < n; ++j) {
          const float sum = dot(a_row.data(), b_cols.data() + std::size_t(j) * std::size_t(k), k);
          float& c = C[std::size_t(j) * std::size_t(ldc) + i];
          c = be == 0.f ? al * sum : al * sum + be * c;  // beta 0: C is not read
        }
      }
    };
    // Rows of C split among the emulator's worker threads, as the grid's blocks are.
    const int workers = int(std::min<unsigned>(cuda_emulator::worker_threads(), unsigned(m)));
    std::vector<std::thread> helpers;
    for (int w = 1; w < workers; ++w) helpers.emplace_back(rows, int(std::int64_t(m) * w / workers),
                                                           int(std::int64_t(m) * (w + 1) / workers));
    rows(0, m / workers);
    for (std::thread& t : helpers) t.join();
  });
  return CUBLAS_STATUS_SUCCESS;
}

template <class TA>
cublasStatus_t gemm_ex_b(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                         int k, float al, const TA* A, int lda, const void* B, cudaDataType_t Btype, int ldb, float be,
                         float* C, int ldc) {
  if (Btype == CUDA_R_16F)
    return gemm("cublasGemmEx", handle, transa, transb, m, n, k, al, A, lda, static_cast<const __half*>(B), ldb, be,
                C, ldc);
  return gemm("cublasGemmEx", handle, transa, transb, m, n, k, al, A, lda, static_cast<const float*>(B), ldb, be, C,
              ldc);
}

}  // namespace

cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                           const float* beta, float* C, int ldc) {
  return gemm("cublasSgemm", handle, transa, transb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
}

// alpha and beta are f32 (the compute type's), as cuBLAS reads them for CUBLAS_COMPUTE_32F.
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t) {
  auto known = [](cudaDataType_t t) { return t == CUDA_R_32F || t == CUDA_R_16F; };
  if (!known(Atype) || !known(Btype) || Ctype != CUDA_R_32F || computeType != CUBLAS_COMPUTE_32F) {
    std::fprintf(stderr, "cuda emulator: cublasGemmEx supports f32/f16 A and B, f32 C, CUBLAS_COMPUTE_32F only\n");
    return CUBLAS_STATUS_NOT_SUPPORTED;
  }
  const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);
  float* c = static_cast<float*>(C);
  if (Atype == CUDA_R_16F)
    return gemm_ex_b(handle, transa, transb, m, n, k, al, static_cast<const __half*>(A), lda, B, Btype, ldb, be, c,
                     ldc);
  return gemm_ex_b(handle, transa, transb, m, n, k, al, static_cast<const float*>(A), lda, B, Btype, ldb, be, c, ldc);
}

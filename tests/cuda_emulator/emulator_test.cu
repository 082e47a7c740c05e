// The CUDA emulator against what CUDA defines: block barriers and shared memory, the
// four warp shuffles, launch-configuration errors, a kernel that would hang or read an
// exited lane (stops with a message), device-memory checks, stream capture into graphs,
// half rounding, the warp matrix functions, and cuBLAS's column-major transpositions (against a naive
// row-major product).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <vector>

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <mma.h>

namespace {

// The emulated device is visible only where asked for (cuda_emulator.hpp).
const bool device_visible = setenv("ARBOR_CUDA_EMULATOR_DEVICES", "1", 0) == 0;

template <class T>
T* device_copy(const std::vector<T>& host) {
  T* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return d;
}

template <class T>
std::vector<T> host_copy(const T* d, std::size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

__device__ float warp_total(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// out[block] = sum of the block's inputs: warp sums, then shared memory and a barrier.
__global__ void block_sum_kernel(const float* in, float* out) {
  __shared__ float partial[32];
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float v = warp_total(in[i]);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0;
    for (unsigned w = 0; w < blockDim.x / 32; ++w) total += partial[w];
    out[blockIdx.x] = total;
  }
}

TEST(CudaEmulator, BlocksReduceThroughSharedMemoryAfterABarrier) {
  for (const int threads : {32, 96, 1024}) {
    const int blocks = 3;
    std::vector<float> in(std::size_t(blocks * threads));
    for (std::size_t i = 0; i < in.size(); ++i) in[i] = float(i % 7) - 2.f;
    float* d_in = device_copy(in);
    float* d_out = device_copy(std::vector<float>(blocks));
    block_sum_kernel<<<blocks, threads>>>(d_in, d_out);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    const std::vector<float> out = host_copy(d_out, blocks);
    for (int b = 0; b < blocks; ++b) {
      float want = 0;
      for (int t = 0; t < threads; ++t) want += in[std::size_t(b * threads + t)];
      EXPECT_EQ(out[std::size_t(b)], want) << "block " << b << " of " << threads << " threads";
    }
    cudaFree(d_in);
    cudaFree(d_out);
  }
}

// out[4 * lane + k]: what lane `lane` receives from each shuffle of its lane number.
__global__ void shuffles_kernel(int* out) {
  const int lane = int(threadIdx.x);
  out[4 * lane + 0] = __shfl_xor_sync(0xffffffffu, lane, 5);
  out[4 * lane + 1] = __shfl_down_sync(0xffffffffu, lane, 3);
  out[4 * lane + 2] = __shfl_up_sync(0xffffffffu, lane, 2);
  out[4 * lane + 3] = __shfl_sync(0xffffffffu, lane, 7);
}

TEST(CudaEmulator, ShufflesReadTheLanesCudaDefines) {
  int* d = device_copy(std::vector<int>(128));
  shuffles_kernel<<<1, 32>>>(d);
  const std::vector<int> out = host_copy(d, 128);
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(out[std::size_t(4 * lane)], lane ^ 5);
    EXPECT_EQ(out[std::size_t(4 * lane + 1)], lane + 3 < 32 ? lane + 3 : lane);  // out of range: own value
    EXPECT_EQ(out[std::size_t(4 * lane + 2)], lane >= 2 ? lane - 2 : lane);
    EXPECT_EQ(out[std::size_t(4 * lane + 3)], 7);
  }
  cudaFree(d);
}

// Each thread changes its own copy of a by-value parameter.
__global__ void private_params_kernel(int base, int* out) {
  base += int(threadIdx.x);
  out[threadIdx.x] = base;
}

TEST(CudaEmulator, EveryThreadHasItsOwnCopyOfTheParameters) {
  int* d = device_copy(std::vector<int>(8));
  private_params_kernel<<<1, 8>>>(100, d);
  const std::vector<int> out = host_copy(d, 8);
  for (int t = 0; t < 8; ++t) EXPECT_EQ(out[std::size_t(t)], 100 + t);
  cudaFree(d);
}

TEST(CudaEmulator, ABadLaunchConfigurationIsTheLastErrorAndRunsNothing) {
  int* d = device_copy(std::vector<int>(8, -1));
  private_params_kernel<<<1, 2048>>>(0, d);  // more than 1024 threads per block
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // read once, then cleared
  private_params_kernel<<<0, 8>>>(0, d);       // an empty grid
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(host_copy(d, 8), std::vector<int>(8, -1));
  cudaFree(d);
}

__global__ void early_exit_then_barrier_kernel(int* out) {
  if (threadIdx.x == 0) return;
  __syncthreads();  // thread 0 never arrives
  out[threadIdx.x] = 1;
}

__global__ void shuffle_with_exited_lane_kernel(int* out) {
  if (threadIdx.x == 3) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
}

TEST(CudaEmulatorDeathTest, AKernelThatWouldHangStopsWithTheLaunchSite) {
  int* d = device_copy(std::vector<int>(64));
  EXPECT_DEATH(early_exit_then_barrier_kernel<<<1, 64>>>(d), "emulator_test.cu:[0-9]+ deadlocked in block");
  EXPECT_DEATH(shuffle_with_exited_lane_kernel<<<1, 32>>>(d), "lanes that have exited");
  cudaFree(d);
}

TEST(CudaEmulator, CopiesCheckWhichSideIsDeviceMemory) {
  std::vector<float> host(16, 1.f);
  float* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 16 * sizeof(float)), cudaSuccess);
  EXPECT_TRUE(std::isnan(host_copy(d, 1)[0])) << "fresh device memory is not zeroed";
  EXPECT_EQ(cudaMemcpy(host.data(), d, 16 * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(d, host.data(), 17 * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue)
      << "one float past the allocation";
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  void* huge = nullptr;
  EXPECT_EQ(cudaMalloc(&huge, std::size_t(1) << 40), cudaErrorMemoryAllocation);
  EXPECT_EQ(huge, nullptr);
  cudaGetLastError();
}

__global__ void add_kernel(int* out, int value) { out[threadIdx.x] += value; }

// A capture runs nothing; each launch of the graph runs every recorded operation, with
// the arguments they had when captured; an update with the same kinds of nodes swaps in
// new arguments, one with other nodes is refused.
TEST(CudaEmulator, CapturedWorkRunsOnlyWhenTheGraphIsLaunched) {
  int* d = device_copy(std::vector<int>(4, 0));
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto capture = [&](int value, bool with_memset) {
    EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
    add_kernel<<<1, 4, 0, stream>>>(d, value);
    if (with_memset) {
      EXPECT_EQ(cudaMemsetAsync(d, 0, sizeof(int), stream), cudaSuccess);
    }
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    return graph;
  };
  cudaGraph_t first = capture(5, false);
  EXPECT_EQ(host_copy(d, 4), std::vector<int>(4, 0)) << "captured work ran at capture";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, first), cudaSuccess);
  const std::uint64_t graphs = cuda_emulator::graphs_launched();
  EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(host_copy(d, 4), std::vector<int>(4, 10));
  EXPECT_EQ(cuda_emulator::graphs_launched(), graphs + 2);
  cudaGraph_t second = capture(1, false);
  cudaGraphExecUpdateResultInfo info{};
  EXPECT_EQ(cudaGraphExecUpdate(exec, second, &info), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(host_copy(d, 4), std::vector<int>(4, 11));
  cudaGraph_t third = capture(1, true);  // one node more
  EXPECT_EQ(cudaGraphExecUpdate(exec, third, &info), cudaErrorGraphExecUpdateFailure);
  EXPECT_EQ(info.result, cudaGraphExecUpdateErrorTopologyChanged);
  EXPECT_EQ(cudaGetLastError(), cudaErrorGraphExecUpdateFailure);
  for (cudaGraph_t g : {first, second, third}) cudaGraphDestroy(g);
  cudaGraphExecDestroy(exec);
  cudaStreamDestroy(stream);
  cudaFree(d);
}

// Work issued to a created stream waits until the host waits for it, as on a GPU busy
// with earlier work: an async copy into pinned memory has not happened before the event
// after it is waited for, and work issued after that event is still queued then. A copy
// through pageable memory, a blocking copy or a stream wait runs what is queued first.
TEST(CudaEmulator, StreamWorkRunsWhenTheHostWaitsForIt) {
  int* d = device_copy(std::vector<int>(4, 0));
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  int* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 4 * sizeof(int)), cudaSuccess);
  std::fill(pinned, pinned + 4, -1);
  cudaEvent_t copied = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming), cudaSuccess);
  add_kernel<<<1, 4, 0, stream>>>(d, 3);
  ASSERT_EQ(cudaMemcpyAsync(pinned, d, 4 * sizeof(int), cudaMemcpyDeviceToHost, stream), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(copied, stream), cudaSuccess);
  add_kernel<<<1, 4, 0, stream>>>(d, 4);
  EXPECT_EQ(std::vector<int>(pinned, pinned + 4), std::vector<int>(4, -1)) << "the copy ran before any wait";
  ASSERT_EQ(cudaEventSynchronize(copied), cudaSuccess);
  EXPECT_EQ(std::vector<int>(pinned, pinned + 4), std::vector<int>(4, 3));
  std::vector<int> pageable(4, -1);  // through pageable memory: the later kernel runs first
  ASSERT_EQ(cudaMemcpyAsync(pageable.data(), d, 4 * sizeof(int), cudaMemcpyDeviceToHost, stream), cudaSuccess);
  EXPECT_EQ(pageable, std::vector<int>(4, 7));
  add_kernel<<<1, 4, 0, stream>>>(d, 1);
  EXPECT_EQ(host_copy(d, 4), std::vector<int>(4, 8)) << "a blocking copy waits for every stream";
  add_kernel<<<1, 4, 0, stream>>>(d, 1);
  ASSERT_EQ(cudaMemcpyAsync(pinned, d, 4 * sizeof(int), cudaMemcpyDeviceToHost, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(std::vector<int>(pinned, pinned + 4), std::vector<int>(4, 9));
  cudaEventDestroy(copied);
  cudaFreeHost(pinned);
  cudaStreamDestroy(stream);
  cudaFree(d);
}

// What a capture cannot hold invalidates it: its end fails and leaves no graph.
TEST(CudaEmulator, ACaptureRefusesHostCopiesAndWaits) {
  int* d = device_copy(std::vector<int>(4, 0));
  std::vector<int> host(4);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (int refused = 0; refused < 2; ++refused) {
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
    EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaErrorIllegalState);
    const cudaError_t e = refused == 0
                              ? cudaMemcpyAsync(host.data(), d, sizeof(int), cudaMemcpyDeviceToHost, stream)
                              : cudaStreamSynchronize(stream);
    EXPECT_EQ(e, cudaErrorStreamCaptureUnsupported);
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(graph, nullptr);
  }
  cudaGraph_t none = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream, &none), cudaErrorIllegalState) << "no capture to end";
  cudaGetLastError();
  cudaStreamDestroy(stream);
  cudaFree(d);
}

TEST(CudaEmulator, HalfConversionRoundsToNearestEven) {
  EXPECT_EQ(__half_as_ushort(__float2half_rn(1.f)), 0x3C00);
  EXPECT_EQ(__half_as_ushort(__float2half_rn(1.f + std::ldexp(1.f, -11))), 0x3C00);  // a tie: to even
  EXPECT_EQ(__half_as_ushort(__float2half_rn(1.f + 3 * std::ldexp(1.f, -11))), 0x3C02);
  EXPECT_EQ(__half_as_ushort(__float2half_rn(65504.f)), 0x7BFF);
  EXPECT_EQ(__half_as_ushort(__float2half_rn(1e6f)), 0x7C00);  // overflow: infinity
  EXPECT_EQ(__half2float(__ushort_as_half(0x0001)), std::ldexp(1.f, -24));  // smallest subnormal
  EXPECT_EQ(__half2float(__ushort_as_half(0xC000)), -2.f);
}

// PTX's prmt (default mode): selector nibble n picks result byte n of x's bytes 0-3 and
// y's 4-7; the GEMV builds floats 2^23 + byte with 0x7440 | k.
TEST(CudaEmulator, BytePermutePicksTheBytesPtxDefines) {
  const unsigned x = 0x03020100u, y = 0x07060504u;
  EXPECT_EQ(__byte_perm(x, y, 0x3210u), x);
  EXPECT_EQ(__byte_perm(x, y, 0x7654u), y);
  EXPECT_EQ(__byte_perm(x, y, 0x0123u), 0x00010203u);
  EXPECT_EQ(__byte_perm(x, y, 0x5140u), 0x05010400u);
  EXPECT_EQ(__byte_perm(0xA1B2C3D4u, 0x4B000000u, 0x7442u), 0x4B0000B2u);
  EXPECT_EQ(__int_as_float(int(__byte_perm(0x000000FFu, 0x4B000000u, 0x7440u))) - 8388608.f, 255.f);
}

// __dp4a (signed): bytes (1, -1, 127, -128) . (2, 3, -4, 5) = 2 - 3 - 508 - 640, plus c.
TEST(CudaEmulator, Dp4aSumsSignedByteProducts) {
  const int a = int(0x807FFF01u), b = int(0x05FC0302u);
  EXPECT_EQ(__dp4a(a, b, 0), 2 - 3 - 508 - 640);
  EXPECT_EQ(__dp4a(a, b, 1000), 1000 + 2 - 3 - 508 - 640);
  EXPECT_EQ(__dp4a(0x0F0F0F0F, 0x7F7F7F7F, 0), 4 * 15 * 127);
}

// Row-major reference: c[i][j] = sum_p a(i, p) b(p, j).
TEST(CudaEmulator, SgemmTransposesAsCublasDoes) {
  const int m = 3, n = 4, k = 5;
  // Column-major storage of op(A) = A^T: A stored as k x m (lda k); op(B) = B: k x n (ldb k).
  std::vector<float> a_stored(std::size_t(k * m)), b_stored(std::size_t(k * n));
  for (std::size_t i = 0; i < a_stored.size(); ++i) a_stored[i] = float(i) * 0.5f - 3.f;
  for (std::size_t i = 0; i < b_stored.size(); ++i) b_stored[i] = float(i % 5) - 1.f;
  cublasHandle_t handle = nullptr;
  ASSERT_TRUE(device_visible);
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  float* da = device_copy(a_stored);
  float* db = device_copy(b_stored);
  float* dc = device_copy(std::vector<float>(std::size_t(m * n), NAN));  // beta 0: never read
  const float one = 1.f, zero = 0.f;
  ASSERT_EQ(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, da, k, db, k, &zero, dc, m),
            CUBLAS_STATUS_SUCCESS);
  const std::vector<float> c = host_copy(dc, std::size_t(m * n));
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float want = 0;
      for (int p = 0; p < k; ++p) want += a_stored[std::size_t(i * k + p)] * b_stored[std::size_t(j * k + p)];
      EXPECT_FLOAT_EQ(c[std::size_t(j * m + i)], want) << i << "," << j;
    }
  EXPECT_EQ(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, da, k - 1, db, k, &zero, dc, m),
            CUBLAS_STATUS_INVALID_VALUE)
      << "lda below op(A)'s stored rows";
  EXPECT_EQ(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, a_stored.data(), m, db, k, &zero, dc, m),
            CUBLAS_STATUS_EXECUTION_FAILED)
      << "a host pointer";
  cublasDestroy(handle);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
}

// GemmEx reads f16 operands as f16 (values exactly representable there give the exact
// product) and refuses what it does not emulate.
TEST(CudaEmulator, GemmExReadsHalfOperands) {
  const int m = 2, n = 3, k = 4;
  std::vector<__half> a_stored(std::size_t(k * m));
  std::vector<float> a_values(a_stored.size()), b_stored(std::size_t(k * n));
  for (std::size_t i = 0; i < a_stored.size(); ++i) {
    a_values[i] = float(i) * 0.25f - 1.f;
    a_stored[i] = __float2half_rn(a_values[i]);
  }
  for (std::size_t i = 0; i < b_stored.size(); ++i) b_stored[i] = float(i % 3) + 0.5f;
  ASSERT_TRUE(device_visible);
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  __half* da = device_copy(a_stored);
  float* db = device_copy(b_stored);
  float* dc = device_copy(std::vector<float>(std::size_t(m * n), NAN));
  const float one = 1.f, zero = 0.f;
  ASSERT_EQ(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, da, CUDA_R_16F, k, db, CUDA_R_32F, k, &zero,
                         dc, CUDA_R_32F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  const std::vector<float> c = host_copy(dc, std::size_t(m * n));
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      float want = 0;
      for (int p = 0; p < k; ++p) want += a_values[std::size_t(i * k + p)] * b_stored[std::size_t(j * k + p)];
      EXPECT_FLOAT_EQ(c[std::size_t(j * m + i)], want) << i << "," << j;
    }
  EXPECT_EQ(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, da, CUDA_R_16F, k, db, CUDA_R_32F, k, &zero,
                         dc, CUDA_R_16F, m, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_NOT_SUPPORTED)
      << "an f16 output";
  cublasDestroy(handle);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
}

// One warp: c = a b + 1 for 16x16 f16 tiles, a row-major, b column-major (leading
// dimension 24), stored row-major and column-major.
__global__ void wmma_kernel(const __half* a, const __half* b, float* row_major_c, float* col_major_c) {
  namespace wmma = nvcuda::wmma;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 1.f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 24);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(row_major_c, acc, 16, wmma::mem_row_major);
  wmma::store_matrix_sync(col_major_c, acc, 16, wmma::mem_col_major);
}

TEST(CudaEmulator, WarpMatrixFunctionsMultiplyWholeTiles) {
  ASSERT_TRUE(device_visible);
  std::vector<__half> a(256), b(16 * 24);
  std::vector<float> av(256), bv(16 * 24);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = __float2half_rn(av[i] = float(int(i % 7) - 3) * 0.5f);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = __float2half_rn(bv[i] = float(int(i % 5) - 2) * 0.25f);
  __half* da = device_copy(a);
  __half* db = device_copy(b);
  float* drow = device_copy(std::vector<float>(256, NAN));
  float* dcol = device_copy(std::vector<float>(256, NAN));
  wmma_kernel<<<1, 32>>>(da, db, drow, dcol);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto row = host_copy(drow, 256), col = host_copy(dcol, 256);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float want = 1.f;
      for (int k = 0; k < 16; ++k) want += av[std::size_t(i * 16 + k)] * bv[std::size_t(j * 24 + k)];
      EXPECT_EQ(row[std::size_t(i * 16 + j)], want) << i << "," << j;
      EXPECT_EQ(col[std::size_t(j * 16 + i)], want) << i << "," << j;
    }
  cudaFree(da);
  cudaFree(db);
  cudaFree(drow);
  cudaFree(dcol);
}

}  // namespace

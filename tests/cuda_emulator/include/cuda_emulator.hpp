// A CUDA emulator for the host CPU, for testing only: the CUDA backend's own sources
// (kernels/cuda/*.cu and the host code around them) compiled by g++ and run here, so
// their logic is tested on machines without a GPU. It is never a user's backend: only
// builds configured with -DARBOR_CUDA_EMULATOR=ON (scripts/test.sh's sanitizer stage)
// link it, and its device is visible only where ARBOR_CUDA_EMULATOR_DEVICES=1.
//
// What it models: the runtime API the backend uses (device memory, copies, streams,
// stream capture into graphs, errors, device properties), cublasSgemm/GemmEx, and
// kernels executed as CUDA defines them: every thread of a block is a fiber, so
// __syncthreads and warp shuffles are real barriers, and a kernel that would deadlock or
// shuffle with an exited lane stops the program with a message naming the launch.
// Blocks run on a few OS threads. Streams are asynchronous, as on a GPU that has not got
// to the work yet: what is issued to a created stream (launches, async copies to or from
// pinned memory, cuBLAS calls, events, graphs) is queued and runs only when the host
// waits for it (cudaStreamSynchronize, cudaEventSynchronize up to that event,
// cudaDeviceSynchronize, and the calls that synchronize implicitly: blocking copies and
// memsets, cudaFree, cudaFreeHost, a copy through pageable memory, work on the legacy
// stream). So host code that reads a result before waiting for it, or reuses a pinned
// buffer a queued copy still reads, gets the wrong bytes here as it could on a GPU.
// What it cannot model: timing, the memory model (races between threads), GPU resource
// limits beyond the launch-configuration checks, cuBLAS's exact rounding.
//
// The .cu files reach g++ through tests/cuda_emulator/rewrite_launches.cmake, which turns
// `kernel<<<grid, block, shared, stream>>>(args)` into
// `kernel * ::cuda_emulator::launch_at(file, line, grid, block, shared, stream)(args)`.
#pragma once

// Code that must know it runs here (a test counting launches) checks this.
#define ARBOR_CUDA_EMULATED 1

#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

// ---- qualifiers ------------------------------------------------------------------------
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// A block's fibers share their OS thread, which runs one block at a time.
#define __shared__ static thread_local

// ---- errors ----------------------------------------------------------------------------
enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevicePointer = 17,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorIllegalState = 401,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorGraphExecUpdateFailure = 910,
};
using cudaError = cudaError_t;

const char* cudaGetErrorString(cudaError_t e);
const char* cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();

// ---- devices ---------------------------------------------------------------------------
struct cudaDeviceProp {
  char name[256];
  std::size_t totalGlobalMem;
  int major, minor;
  int multiProcessorCount;
  int warpSize;
  int maxThreadsPerBlock;
  std::size_t sharedMemPerBlock;
};
cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceSynchronize();

// ---- memory ----------------------------------------------------------------------------
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
struct CUstream_st;
using cudaStream_t = CUstream_st*;
inline constexpr unsigned cudaStreamDefault = 0, cudaStreamNonBlocking = 1;

cudaError_t cudaMalloc(void** ptr, std::size_t bytes);
template <class T>
cudaError_t cudaMalloc(T** ptr, std::size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMemGetInfo(std::size_t* free, std::size_t* total);
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* dst, int value, std::size_t bytes);
cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t stream = nullptr);

// Page-locked host memory: the only host memory an async copy leaves queued (a copy
// through pageable memory completes before it returns).
cudaError_t cudaMallocHost(void** ptr, std::size_t bytes);
cudaError_t cudaFreeHost(void* ptr);

// Events: a record is queued on its stream; synchronizing runs the stream up to it.
struct CUevent_st;
using cudaEvent_t = CUevent_st*;
inline constexpr unsigned cudaEventDefault = 0, cudaEventDisableTiming = 2;
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t event);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);

// ---- graphs: stream capture, instantiation, update, launch ------------------------------
// Work issued to a capturing stream is recorded, not run; a graph launch runs it in
// order. Host<->device copies and cuBLAS calls on a capturing stream are refused (they
// invalidate the capture), as is synchronizing it.
struct CUgraph_st;
struct CUgraphExec_st;
struct CUgraphNode_st;
using cudaGraph_t = CUgraph_st*;
using cudaGraphExec_t = CUgraphExec_st*;
using cudaGraphNode_t = CUgraphNode_st*;
enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};
enum cudaGraphExecUpdateResult {
  cudaGraphExecUpdateSuccess = 0,
  cudaGraphExecUpdateError = 1,
  cudaGraphExecUpdateErrorTopologyChanged = 2,
};
struct cudaGraphExecUpdateResultInfo {
  cudaGraphExecUpdateResult result;
  cudaGraphNode_t errorNode, errorFromNode;
};
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long flags = 0);
// Succeeds when `graph` has the nodes of `exec`'s graph, of the same kinds in the same
// order (parameters may differ): `exec` then runs `graph`'s parameters.
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t exec, cudaGraph_t graph, cudaGraphExecUpdateResultInfo* info);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);

// ---- vector types (vector_types.h): what the kernels load 128 bits at a time ----------
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(16) float4 {
  float x, y, z, w;
};

// ---- half precision (cuda_fp16.h) -----------------------------------------------------
struct __half {
  unsigned short bits;
};
inline float __half2float(__half h) { return static_cast<float>(std::bit_cast<_Float16>(h.bits)); }
inline __half __float2half_rn(float f) { return {std::bit_cast<unsigned short>(static_cast<_Float16>(f))}; }
inline __half __float2half(float f) { return __float2half_rn(f); }
inline __half __ushort_as_half(unsigned short bits) { return {bits}; }
inline unsigned short __half_as_ushort(__half h) { return h.bits; }

// ---- device math -----------------------------------------------------------------------
inline float rsqrtf(float x) { return 1.f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline bool isnan(float x) { return std::isnan(x); }
inline bool isfinite(float x) { return std::isfinite(x); }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline int __float_as_int(float f) { return std::bit_cast<int>(f); }
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline float __int_as_float(int i) { return std::bit_cast<float>(i); }
// Byte n of the result: the byte that selector nibble n (its low 3 bits) picks of the
// eight bytes x (0-3) then y (4-7).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const std::uint64_t bytes = std::uint64_t(y) << 32 | x;
  unsigned r = 0;
  for (int n = 0; n < 4; ++n) r |= unsigned(bytes >> (8 * ((s >> (4 * n)) & 7u)) & 0xFFu) << (8 * n);
  return r;
}
// The four signed bytes of a times those of b, summed, plus c.
inline int __dp4a(int a, int b, int c) {
  for (int n = 0; n < 4; ++n) c += int(static_cast<std::int8_t>(a >> (8 * n))) * int(static_cast<std::int8_t>(b >> (8 * n)));
  return c;
}
template <class T>
T __ldg(const T* p) {
  return *p;
}

// ---- the execution model ---------------------------------------------------------------
struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace cuda_emulator {

struct ThreadIndex {
  uint3 thread, block;
  dim3 block_dim, grid_dim;
  int lane;  // within the warp: the linear thread index (x fastest) mod 32
};
// The emulated thread now running (set by the scheduler before each resume).
inline thread_local const ThreadIndex* current_thread = nullptr;

// Barriers: every thread of the block; the lanes of `mask` in the caller's warp, whose
// values are exchanged (`value` in, the value of lane `source_lane(own lane)` out).
void sync_block();
std::uint64_t warp_exchange(unsigned mask, std::uint64_t value, int source_lane);
inline int lane_id() { return current_thread->lane; }

struct LaunchConfig {
  const char* file;
  int line;
  dim3 grid, block;
  std::size_t shared_bytes;
  cudaStream_t stream;
};
// Runs `body` once per thread of the grid; a bad configuration sets the last error
// (as a real launch does), a kernel that deadlocks or misuses a barrier aborts.
void run_grid(const LaunchConfig& config, void (*body)(void*), void* context);
// Grids launched so far by this process (well-formed launches, each run of a captured
// one included; cuBLAS calls not counted), graphs launched, and captures ended with a
// graph.
std::uint64_t grids_launched();
std::uint64_t graphs_launched();
std::uint64_t graphs_captured();

// Stream capture (graph.cpp): whether `stream` is capturing, and work for its graph (a
// node of kind `kind`, run when the graph is launched).
bool capturing(cudaStream_t stream);
void record(cudaStream_t stream, const char* kind, std::function<void()> work);
// Issues work to `stream` (stream.cpp): a node of its graph when capturing; queued on a
// created stream, to run when the host waits for it; on the legacy stream (null), run now,
// after every stream's queue. ran_on_queue() is true inside queued work.
void issue(cudaStream_t stream, const char* kind, std::function<void()> work);
// The checks a launch makes before it is queued: false (last error set, the reason
// printed) for a bad configuration; a launch from inside a kernel aborts.
bool launch_accepted(const LaunchConfig& config);
// An operation a capture cannot hold: the capture is invalidated (its end fails).
cudaError_t refuse_in_capture(cudaStream_t stream, const char* what);

template <class... A>
struct PendingLaunch {
  LaunchConfig config;
  std::tuple<A...> args;
};

struct LaunchAt {
  LaunchConfig config;
  template <class... A>
  PendingLaunch<std::decay_t<A>...> operator()(A&&... args) const {
    return {config, std::tuple<std::decay_t<A>...>(std::forward<A>(args)...)};
  }
};

inline LaunchAt launch_at(const char* file, int line, dim3 grid, dim3 block, std::size_t shared_bytes = 0,
                          cudaStream_t stream = nullptr) {
  return {{file, line, grid, block, shared_bytes, stream}};
}

// `kernel * launch_at(...)(args...)`: the arguments are converted to the kernel's
// parameter types once, as a launch does, and every thread calls the kernel with its own
// copies of them.
template <class... P, class... A>
void operator*(void (*kernel)(P...), PendingLaunch<A...>&& launch) {
  struct Call {
    void (*kernel)(P...);
    std::tuple<std::decay_t<P>...> params;
  } call{kernel, std::apply([](auto&... a) { return std::tuple<std::decay_t<P>...>(a...); }, launch.args)};
  void (*body)(void*) = [](void* c) { std::apply(static_cast<Call*>(c)->kernel, static_cast<Call*>(c)->params); };
  if (!launch_accepted(launch.config)) return;
  // The queue (or the graph) keeps its own copy of the arguments.
  issue(launch.config.stream, "kernel", [config = launch.config, call, body]() mutable { run_grid(config, body, &call); });
}

template <class T>
std::uint64_t to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable_v<T>);
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <class T>
T from_bits(std::uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

}  // namespace cuda_emulator

#define threadIdx (::cuda_emulator::current_thread->thread)
#define blockIdx (::cuda_emulator::current_thread->block)
#define blockDim (::cuda_emulator::current_thread->block_dim)
#define gridDim (::cuda_emulator::current_thread->grid_dim)
inline constexpr int warpSize = 32;

inline void __syncthreads() { cuda_emulator::sync_block(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { cuda_emulator::warp_exchange(mask, 0, 0); }

template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  const int lane = cuda_emulator::lane_id();
  const int source = (lane ^ lane_mask) < ((lane / width) + 1) * width ? lane ^ lane_mask : lane;
  return cuda_emulator::from_bits<T>(cuda_emulator::warp_exchange(mask, cuda_emulator::to_bits(v), source));
}
template <class T>
T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int lane = cuda_emulator::lane_id();
  const int source = (lane % width) + int(delta) < width ? lane + int(delta) : lane;
  return cuda_emulator::from_bits<T>(cuda_emulator::warp_exchange(mask, cuda_emulator::to_bits(v), source));
}
template <class T>
T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  const int lane = cuda_emulator::lane_id();
  const int source = (lane % width) >= int(delta) ? lane - int(delta) : lane;
  return cuda_emulator::from_bits<T>(cuda_emulator::warp_exchange(mask, cuda_emulator::to_bits(v), source));
}
template <class T>
T __shfl_sync(unsigned mask, T v, int source_lane, int width = 32) {
  const int lane = cuda_emulator::lane_id();
  const int source = (lane / width) * width + (source_lane % width);
  return cuda_emulator::from_bits<T>(cuda_emulator::warp_exchange(mask, cuda_emulator::to_bits(v), source));
}

// Blocks may run on several OS threads at once: atomics are real atomics.
template <class T>
T atomicAdd(T* address, T value) {
  return std::atomic_ref<T>(*address).fetch_add(value);
}
template <class T>
T atomicMax(T* address, T value) {
  std::atomic_ref<T> a(*address);
  T old = a.load();
  while (old < value && !a.compare_exchange_weak(old, value)) {
  }
  return old;
}

// ---- cuBLAS (cublas_v2.h): the calls the backend makes -------------------------------
enum cublasStatus_t {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3 };
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16F = 2 };
enum cublasComputeType_t { CUBLAS_COMPUTE_32F = 68 };
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
struct cublasContext;
using cublasHandle_t = cublasContext*;

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode);
const char* cublasGetStatusString(cublasStatus_t status);
// Column-major C (m x n) = alpha op(A) op(B) + beta C, checked as cuBLAS checks it.
cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                           int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                           const float* beta, float* C, int ldc);
// The same with A and B each f32 or f16 (products summed in f32, as the tensor cores do),
// C f32, CUBLAS_COMPUTE_32F: what the backend's half-precision GEMM asks for.
cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                            int k, const void* alpha, const void* A, cudaDataType_t Atype, int lda, const void* B,
                            cudaDataType_t Btype, int ldb, const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t computeType, cublasGemmAlgo_t algo);

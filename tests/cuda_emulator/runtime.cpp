// The emulated runtime API: devices, device memory, copies, streams and errors.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "internal.hpp"

namespace cuda_emulator {
namespace {

thread_local cudaError_t last_error = cudaSuccess;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// Devices exist only where the environment asks for them, so a build that links the
// emulator still picks the CPU wherever a test does not ask for "cuda" on purpose.
int visible_devices() { return env_int("ARBOR_CUDA_EMULATOR_DEVICES", 0); }
std::size_t memory_bytes() { return std::size_t(env_int("ARBOR_CUDA_EMULATOR_MEMORY_MB", 2048)) << 20; }

struct Memory {
  std::mutex mutex;
  Allocations allocations;
  std::size_t allocated = 0;
};
Memory& memory() {
  static Memory m;
  return m;
}

}  // namespace

cudaError_t set_last_error(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}

bool is_device_range(const void* p, std::size_t bytes) {
  Memory& m = memory();
  std::lock_guard lock(m.mutex);
  return inside_one(m.allocations, p, bytes);
}

void fatal(const char* format, ...) {
  std::fprintf(stderr, "cuda emulator: ");
  va_list args;
  va_start(args, format);
  std::vfprintf(stderr, format, args);
  va_end(args);
  std::fprintf(stderr, "\n");
  std::fflush(stderr);
  std::abort();
}

}  // namespace cuda_emulator

using cuda_emulator::set_last_error;

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorGraphExecUpdateFailure: return "cudaErrorGraphExecUpdateFailure";
  }
  return "cudaErrorUnknown";
}

const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to a previous error during capture";
    case cudaErrorGraphExecUpdateFailure: return "the graph update was not performed because it included changes "
                                                 "which violated constraints specific to instantiated graph update";
  }
  return "unknown error";
}

cudaError_t cudaGetLastError() { return std::exchange(cuda_emulator::last_error, cudaSuccess); }
cudaError_t cudaPeekAtLastError() { return cuda_emulator::last_error; }

cudaError_t cudaGetDeviceCount(int* count) {
  *count = cuda_emulator::visible_devices();
  return *count > 0 ? cudaSuccess : set_last_error(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int device) {
  return device >= 0 && device < cuda_emulator::visible_devices() ? cudaSuccess
                                                                  : set_last_error(cudaErrorInvalidDevice);
}

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cuda_emulator::visible_devices() > 0 ? cudaSuccess : set_last_error(cudaErrorNoDevice);
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (device < 0 || device >= cuda_emulator::visible_devices()) return set_last_error(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::snprintf(prop->name, sizeof prop->name, "Arbor CUDA emulator (host CPU)");
  prop->totalGlobalMem = cuda_emulator::memory_bytes();
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 1;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->sharedMemPerBlock = 48 << 10;
  return cudaSuccess;
}

cudaError_t cudaMalloc(void** ptr, std::size_t bytes) {
  *ptr = nullptr;
  auto& m = cuda_emulator::memory();
  std::lock_guard lock(m.mutex);
  if (bytes == 0) return cudaSuccess;
  if (m.allocated + bytes > cuda_emulator::memory_bytes()) return set_last_error(cudaErrorMemoryAllocation);
  void* p = nullptr;
  if (posix_memalign(&p, 256, bytes) != 0) return set_last_error(cudaErrorMemoryAllocation);
  // Device memory is not zeroed: all-ones bytes read as NaN floats, so a kernel that
  // reads what nothing wrote shows it in its results.
  std::memset(p, 0xFF, bytes);
  m.allocations[static_cast<const char*>(p)] = bytes;
  m.allocated += bytes;
  *ptr = p;
  return cudaSuccess;
}

// Waits for every stream first, as cudaFree synchronizes the device.
cudaError_t cudaFree(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  cuda_emulator::run_all_queued();
  auto& m = cuda_emulator::memory();
  std::lock_guard lock(m.mutex);
  auto it = m.allocations.find(static_cast<const char*>(ptr));
  if (it == m.allocations.end()) return set_last_error(cudaErrorInvalidValue);
  m.allocated -= it->second;
  m.allocations.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(std::size_t* free, std::size_t* total) {
  if (cuda_emulator::visible_devices() <= 0) return set_last_error(cudaErrorNoDevice);
  auto& m = cuda_emulator::memory();
  std::lock_guard lock(m.mutex);
  *total = cuda_emulator::memory_bytes();
  *free = *total - m.allocated;
  return cudaSuccess;
}

namespace {

// Whether a copy of `kind` has its ends where the kind says (else the reason printed).
bool copy_kind_matches(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  using cuda_emulator::is_device_range;
  const bool dst_device = is_device_range(dst, bytes), src_device = is_device_range(src, bytes);
  bool ok = true;
  switch (kind) {
    case cudaMemcpyHostToDevice: ok = dst_device && !src_device; break;
    case cudaMemcpyDeviceToHost: ok = src_device && !dst_device; break;
    case cudaMemcpyDeviceToDevice: ok = src_device && dst_device; break;
    case cudaMemcpyHostToHost: ok = !src_device && !dst_device; break;
    case cudaMemcpyDefault: break;
  }
  if (!ok)
    std::fprintf(stderr,
                 "cuda emulator: cudaMemcpy kind %d of %zu bytes: destination %s device memory, source %s "
                 "(each must match the kind)\n",
                 int(kind), bytes, dst_device ? "is" : "is not", src_device ? "is" : "is not");
  return ok;
}

// The host end of a copy, when it has one.
const void* host_end(void* dst, const void* src, cudaMemcpyKind kind) {
  return kind == cudaMemcpyHostToDevice ? src : kind == cudaMemcpyDeviceToHost ? dst : nullptr;
}

}  // namespace

// Blocking: waits for every stream first (as the legacy stream's copies do).
cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  if (!copy_kind_matches(dst, src, bytes, kind)) return set_last_error(cudaErrorInvalidValue);
  cuda_emulator::run_all_queued();
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

// Queued when both ends are device or pinned memory; through pageable memory the copy
// is done (after the stream's earlier work) before the call returns, as a driver
// staging it does.
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (cuda_emulator::capturing(stream) && kind != cudaMemcpyDeviceToDevice)
    return cuda_emulator::refuse_in_capture(stream, "a copy from or to host memory");
  if (!copy_kind_matches(dst, src, bytes, kind)) return set_last_error(cudaErrorInvalidValue);
  const void* host = host_end(dst, src, kind);
  if (host != nullptr && !cuda_emulator::is_pinned_range(host, bytes)) {
    cuda_emulator::run_queued(stream);
    std::memmove(dst, src, bytes);
    return cudaSuccess;
  }
  cuda_emulator::issue(stream, "memcpy", [=] { std::memmove(dst, src, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemset(void* dst, int value, std::size_t bytes) {
  if (bytes == 0) return cudaSuccess;
  if (!cuda_emulator::is_device_range(dst, bytes)) return set_last_error(cudaErrorInvalidValue);
  cuda_emulator::run_all_queued();
  std::memset(dst, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* dst, int value, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (!cuda_emulator::is_device_range(dst, bytes)) return set_last_error(cudaErrorInvalidValue);
  cuda_emulator::issue(stream, "memset", [=] { std::memset(dst, value, bytes); });
  return cudaSuccess;
}

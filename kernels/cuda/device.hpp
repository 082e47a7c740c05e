// The CUDA runtime as the rest of Arbor sees it: how many devices there are, what one
// is, and CUDA errors as text. Plain C++ (no CUDA types), so any layer may include it.
#pragma once

#include <cstddef>
#include <string>

namespace arbor::kernels::cuda {

// The static shared memory a block may declare on every architecture (more needs a
// dynamic allocation and an opt-in per kernel).
inline constexpr std::size_t kMaxStaticSharedBytes = 48 * 1024;

// CUDA devices the driver reports; 0 when there is no driver or no device (`why`, when
// given, then says which, with the CUDA error).
int device_count(std::string* why = nullptr);

struct DeviceInfo {
  int index = 0;
  std::string name;           // "NVIDIA H200"
  int major = 0, minor = 0;   // compute capability
  int num_sms = 0;
  std::size_t total_bytes = 0, free_bytes = 0;
};
// Fills `out` for device `index`; false with `error` set when the runtime fails.
bool device_info(int index, DeviceInfo& out, std::string* error);

// "cudaMalloc: out of memory (cudaErrorMemoryAllocation)": `what` failed with `code`
// (a cudaError_t).
std::string error_text(const char* what, int code);

}  // namespace arbor::kernels::cuda

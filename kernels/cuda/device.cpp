#include "kernels/cuda/device.hpp"

#include <cuda_runtime_api.h>

namespace arbor::kernels::cuda {

std::string error_text(const char* what, int code) {
  const auto e = static_cast<cudaError_t>(code);
  return std::string(what) + ": " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")";
}

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // reset the error state so later calls start clean
    if (why) *why = "no CUDA device is usable (" + error_text("cudaGetDeviceCount", e) + ")";
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device found";
  return n;
}

bool device_info(int index, DeviceInfo& out, std::string* error) {
  cudaDeviceProp p{};
  if (const cudaError_t e = cudaGetDeviceProperties(&p, index); e != cudaSuccess) {
    if (error) *error = error_text("cudaGetDeviceProperties", e);
    return false;
  }
  out.index = index;
  out.name = p.name;
  out.major = p.major;
  out.minor = p.minor;
  out.num_sms = p.multiProcessorCount;
  if (const cudaError_t e = cudaSetDevice(index); e != cudaSuccess) {
    if (error) *error = error_text("cudaSetDevice", e);
    return false;
  }
  if (const cudaError_t e = cudaMemGetInfo(&out.free_bytes, &out.total_bytes); e != cudaSuccess) {
    if (error) *error = error_text("cudaMemGetInfo", e);
    return false;
  }
  return true;
}

}  // namespace arbor::kernels::cuda

#include "model/cuda/cuda_page_allocator.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/cuda/device.hpp"

namespace arbor::model {

CudaPageAllocator::~CudaPageAllocator() {
  if (region_ != nullptr) cudaFree(region_);
}

Result<void*> CudaPageAllocator::allocate(std::size_t num_bytes) {
  if (num_bytes == 0) return static_cast<void*>(nullptr);
  if (region_ != nullptr)
    return fail(ErrorCode::out_of_memory, "CUDA page allocator: it already holds a KV pool (one per engine); "
                                          "free that pool first");
  if (const cudaError_t e = cudaSetDevice(device_); e != cudaSuccess)
    return fail(ErrorCode::internal, kernels::cuda::error_text("cudaSetDevice", e));
  void* region = nullptr;
  if (const cudaError_t e = cudaMalloc(&region, num_bytes); e != cudaSuccess) {
    cudaGetLastError();
    std::size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    return fail(ErrorCode::out_of_memory,
                "CUDA page allocator: cannot allocate " + std::to_string(num_bytes >> 20) +
                    " MiB for the KV page pool (" + std::to_string(free_bytes >> 20) + " of " +
                    std::to_string(total_bytes >> 20) + " MiB free on device " + std::to_string(device_) + ": " +
                    kernels::cuda::error_text("cudaMalloc", e) + "); lower kv_memory_mb");
  }
  region_ = region;
  region_bytes_ = num_bytes;
  return region;
}

void CudaPageAllocator::deallocate(void* region, std::size_t) {
  if (region == nullptr || region != region_) return;
  cudaFree(region_);
  region_ = nullptr;
  region_bytes_ = 0;
}

}  // namespace arbor::model

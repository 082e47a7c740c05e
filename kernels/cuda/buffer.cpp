#include "kernels/cuda/buffer.hpp"

#include <cuda_runtime_api.h>

#include <utility>

#include "kernels/cuda/device.hpp"

namespace arbor::kernels::cuda {

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::release() {
  if (ptr_ != nullptr) cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

bool DeviceBuffer::reserve(std::size_t bytes, std::string* error) {
  if (bytes <= bytes_) return true;
  release();
  if (const cudaError_t e = cudaMalloc(&ptr_, bytes); e != cudaSuccess) {
    ptr_ = nullptr;
    cudaGetLastError();
    if (error)
      *error = error_text(("cudaMalloc of " + std::to_string(bytes >> 20) + " MiB").c_str(), e);
    return false;
  }
  bytes_ = bytes;
  return true;
}

}  // namespace arbor::kernels::cuda

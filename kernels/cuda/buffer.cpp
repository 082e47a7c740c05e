#include "kernels/cuda/buffer.hpp"

#include <cuda_runtime_api.h>

#include <utility>

#include "kernels/cuda/device.hpp"

namespace arbor::kernels::cuda {
namespace {

cudaError_t allocate(BufferMemory memory, void** ptr, std::size_t bytes) {
  return memory == BufferMemory::device ? cudaMalloc(ptr, bytes) : cudaMallocHost(ptr, bytes);
}

const char* allocator_name(BufferMemory memory) {
  return memory == BufferMemory::device ? "cudaMalloc" : "cudaMallocHost";
}

}  // namespace

template <BufferMemory kMemory>
Buffer<kMemory>::~Buffer() {
  release();
}

template <BufferMemory kMemory>
Buffer<kMemory>::Buffer(Buffer&& other) noexcept
    : ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

template <BufferMemory kMemory>
Buffer<kMemory>& Buffer<kMemory>::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    ptr_ = std::exchange(other.ptr_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

template <BufferMemory kMemory>
void Buffer<kMemory>::release() {
  if (ptr_ != nullptr) kMemory == BufferMemory::device ? cudaFree(ptr_) : cudaFreeHost(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
}

template <BufferMemory kMemory>
bool Buffer<kMemory>::reserve(std::size_t bytes, std::string* error) {
  if (bytes <= bytes_) return true;
  release();
  if (const cudaError_t e = allocate(kMemory, &ptr_, bytes); e != cudaSuccess) {
    ptr_ = nullptr;
    cudaGetLastError();
    if (error)
      *error = error_text((std::string(allocator_name(kMemory)) + " of " + std::to_string(bytes >> 20) + " MiB").c_str(),
                          e);
    return false;
  }
  bytes_ = bytes;
  return true;
}

template class Buffer<BufferMemory::device>;
template class Buffer<BufferMemory::pinned_host>;

}  // namespace arbor::kernels::cuda

// Memory owned by one object, freed with it; plain C++, move-only. DeviceBuffer: one
// cudaMalloc region (never managed memory). PinnedBuffer: page-locked host memory
// (cudaMallocHost), the only host memory an async copy can leave queued, so a step's
// metadata and outputs cross without the host waiting.
#pragma once

#include <cstddef>
#include <string>

namespace arbor::kernels::cuda {

enum class BufferMemory { device, pinned_host };

template <BufferMemory kMemory>
class Buffer {
 public:
  Buffer() = default;
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Makes the buffer at least `bytes` long; a growing buffer is reallocated and loses
  // its contents (freeing waits for the device: work queued on it may still use it).
  // False, with `error` saying how much was asked and why it failed.
  bool reserve(std::size_t bytes, std::string* error);
  void release();

  void* data() const { return ptr_; }
  std::size_t size() const { return bytes_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

using DeviceBuffer = Buffer<BufferMemory::device>;
using PinnedBuffer = Buffer<BufferMemory::pinned_host>;

extern template class Buffer<BufferMemory::device>;
extern template class Buffer<BufferMemory::pinned_host>;

}  // namespace arbor::kernels::cuda

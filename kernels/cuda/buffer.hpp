// Device memory owned by one object: one cudaMalloc region (never managed memory),
// freed with the object. Plain C++; move-only.
#pragma once

#include <cstddef>
#include <string>

namespace arbor::kernels::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Makes the buffer at least `bytes` long; a growing buffer is reallocated and loses
  // its contents. False, with `error` saying how much was asked and why it failed.
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

}  // namespace arbor::kernels::cuda

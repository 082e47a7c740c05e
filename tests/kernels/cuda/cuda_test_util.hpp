// Helpers for the cross-backend tests (each CUDA kernel against its CPU reference):
// skip without a device, copy vectors to and from device memory, upload a weight matrix.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cuda/buffer.hpp"
#include "kernels/cuda/device.hpp"
#include "kernels/cuda/device_matrix.hpp"
#include "tests/max_abs_diff.hpp"

namespace arbor::kernels::cuda::testing {

// Skips the test, saying why, where no CUDA device is usable (CI, developer machines).
#define ARBOR_REQUIRE_CUDA()                                                                         \
  do {                                                                                               \
    std::string why;                                                                                 \
    if (::arbor::kernels::cuda::device_count(&why) == 0)                                             \
      GTEST_SKIP() << "no CUDA device (" << why << "); the CUDA tests run on a GPU machine "       \
                   << "(scripts/device_check.sh)";                                                   \
  } while (0)

template <class T>
DeviceBuffer to_device(const std::vector<T>& host) {
  DeviceBuffer d;
  std::string error;
  EXPECT_TRUE(d.reserve(std::max<std::size_t>(1, host.size() * sizeof(T)), &error)) << error;
  if (!host.empty()) {
    EXPECT_EQ(cudaMemcpy(d.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  }
  return d;
}

template <class T>
std::vector<T> to_host(const DeviceBuffer& d, std::size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << cudaGetErrorString(cudaGetLastError());
  if (n > 0) {
    EXPECT_EQ(cudaMemcpy(host.data(), d.data(), n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  }
  return host;
}

// A matrix in GGUF's layout (`bytes`) uploaded in the device layout, as the engine
// uploads weights; `buffer` owns its memory.
inline DeviceMatrix upload(GgmlType type, const std::vector<std::uint8_t>& bytes, std::int64_t rows,
                           std::int64_t cols, DeviceBuffer& buffer) {
  std::string error;
  EXPECT_TRUE(upload_matrix(type, bytes.data(), rows, cols, buffer, &error)) << error;
  return DeviceMatrix{type, buffer.data(), rows, cols};
}

// <= 1 means within tolerance everywhere (NaNs: infinite).
using ::arbor::testing::worst_ratio;

}  // namespace arbor::kernels::cuda::testing

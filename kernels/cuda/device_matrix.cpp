#include "kernels/cuda/device_matrix.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cuda/buffer.hpp"
#include "kernels/cuda/device.hpp"

namespace arbor::kernels::cuda {
namespace {

constexpr std::int64_t kStagingBytes = std::int64_t(8) << 20;

bool copy(void* device, const void* host, std::size_t bytes, std::string* error) {
  if (const cudaError_t e = cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice); e != cudaSuccess) {
    cudaGetLastError();
    if (error) *error = error_text("cudaMemcpy of a weight matrix", e);
    return false;
  }
  return true;
}

}  // namespace

bool upload_matrix(GgmlType type, const void* host, std::int64_t rows, std::int64_t cols, DeviceBuffer& buffer,
                   std::string* error) {
  const std::size_t total = row_bytes(type, cols) * std::size_t(rows);
  if (!buffer.reserve(total, error)) return false;
  auto* device = buffer.as<std::uint8_t>();
  const auto* src = static_cast<const std::uint8_t*>(host);
  const BlockPlanes planes = block_planes(type);
  if (planes.quant_bytes == 0) return copy(device, src, total, error);
  // A GGUF block is its scale(s), then its quants.
  const std::int64_t blocks = rows * (cols / 32), block_bytes = planes.scale_bytes + planes.quant_bytes;
  const std::int64_t chunk = std::max<std::int64_t>(1, kStagingBytes / block_bytes);
  std::vector<std::uint8_t> quants(std::size_t(chunk * planes.quant_bytes)), scales(std::size_t(chunk * planes.scale_bytes));
  std::uint8_t* scale_plane = device + blocks * planes.quant_bytes;
  for (std::int64_t b0 = 0; b0 < blocks; b0 += chunk) {
    const std::int64_t n = std::min(chunk, blocks - b0);
    for (std::int64_t i = 0; i < n; ++i) {
      const std::uint8_t* block = src + (b0 + i) * block_bytes;
      std::memcpy(&scales[std::size_t(i * planes.scale_bytes)], block, std::size_t(planes.scale_bytes));
      std::memcpy(&quants[std::size_t(i * planes.quant_bytes)], block + planes.scale_bytes,
                  std::size_t(planes.quant_bytes));
    }
    if (!copy(device + b0 * planes.quant_bytes, quants.data(), std::size_t(n * planes.quant_bytes), error) ||
        !copy(scale_plane + b0 * planes.scale_bytes, scales.data(), std::size_t(n * planes.scale_bytes), error))
      return false;
  }
  return true;
}

}  // namespace arbor::kernels::cuda

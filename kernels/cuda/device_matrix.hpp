// A weight matrix in device memory: the device twin of kernels::WeightMatrix, and the
// layout its bytes have there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/ggml_types.hpp"
#include "kernels/cuda/buffer.hpp"

// block_planes() is called by kernels too; .cpp files see it as a plain function.
#if defined(__CUDACC__)
#define ARBOR_HOST_DEVICE __host__ __device__
#else
#define ARBOR_HOST_DEVICE
#endif

namespace arbor::kernels::cuda {


// [rows = out features][cols = in features]. On the device Q4_0, Q4_1 and Q8_0 stay
// quantized; every other type is uploaded as F32 (model/cuda/cuda_weights.hpp).
//
// Device layout of a quantized matrix: GGUF's blocks (18, 20 or 34 bytes: scale(s), then
// quants) split into two planes, in the same block order (row-major, block b of row r is
// block r * cols / 32 + b):
//   quants: every block's 16 (Q4_0, Q4_1) or 32 (Q8_0) quant bytes, back to back, so each
//           block's quants start on a 16-byte boundary and are read with 128-bit loads;
//   scales: every block's f16 d (Q4_0, Q8_0) or f16 d, m (Q4_1), after the quants plane.
// The same bytes as GGUF's, rearranged; upload_matrix() writes it. F32 is row-major as
// stored.
struct DeviceMatrix {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;  // device memory, rows * row_bytes(type, cols) bytes
  std::int64_t rows = 0;
  std::int64_t cols = 0;
};

// True for the types device matrices hold (Q4_0, Q4_1, Q8_0, F32).
inline bool is_device_type(GgmlType t) {
  return t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q8_0 || t == GgmlType::F32;
}

// Bytes of one block's quants and of its scale(s) in the device layout (0, 0 for F32).
struct BlockPlanes {
  std::int64_t quant_bytes = 0;
  std::int64_t scale_bytes = 0;
};

ARBOR_HOST_DEVICE constexpr BlockPlanes block_planes(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0: return {16, 2};
    case GgmlType::Q4_1: return {16, 4};
    case GgmlType::Q8_0: return {32, 2};
    default: return {};
  }
}

// Copies a matrix in GGUF's layout (host memory, a device type) into `buffer`, reserved
// to fit, in the device layout; a few MiB staged at a time. False with `error` when
// device memory or a copy fails.
bool upload_matrix(GgmlType type, const void* host, std::int64_t rows, std::int64_t cols, DeviceBuffer& buffer,
                   std::string* error);

}  // namespace arbor::kernels::cuda

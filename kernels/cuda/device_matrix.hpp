// A weight matrix in device memory: the device twin of kernels::WeightMatrix.
#pragma once

#include <cstdint>

#include "kernels/ggml_types.hpp"

namespace arbor::kernels::cuda {

// [rows = out features][cols = in features], one contiguous row per output feature, in
// GGUF's block layout. On the device Q4_0, Q4_1 and Q8_0 stay quantized; every other
// type is uploaded as F32 (model/cuda/cuda_weights.hpp).
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

}  // namespace arbor::kernels::cuda

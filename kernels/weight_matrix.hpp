// A weight matrix as GGUF stores it, and how activations may enter the int8 matmuls:
// backend-neutral descriptions every backend's matmul reads (kernels/cpu/matmul.hpp,
// the CUDA engine's upload).
//
// A weight matrix is [rows = out features][cols = in features], one contiguous
// (quantized) row per output feature, exactly as GGUF stores it.
#pragma once

#include <cstdint>

#include "kernels/ggml_types.hpp"

namespace arbor::kernels {

struct WeightMatrix {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;  // rows * row_bytes(type, cols) bytes (host memory), not owned
  std::int64_t rows = 0;       // output features
  std::int64_t cols = 0;       // input features
};

// How many 8-bit terms represent each activation block in the int8 matmuls of
// Q4_0/Q4_1/Q8_0 weights (kernels/cpu/matmul.hpp says what each costs and gives).
enum class MatmulPrecision { accurate, fast };

}  // namespace arbor::kernels

// Device-side reads of ggml blocks (nvcc only). Values exactly as ggml's
// dequantize_row_* (and kernels/cpu/dequantize.cpp) define them. Blocks are byte-packed
// (18, 20, 34 bytes), so fields are read byte by byte: no alignment is assumed.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/ggml_types.hpp"

namespace arbor::kernels::cuda {

// Bytes of 32 consecutive values of a device matrix type (one quant block; 32 floats).
__host__ __device__ __forceinline__ std::int64_t bytes_per_32(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0: return 18;
    case GgmlType::Q4_1: return 20;
    case GgmlType::Q8_0: return 34;
    default: return 128;  // F32
  }
}

__device__ __forceinline__ float load_f16(const std::uint8_t* p) {
  const unsigned short bits = static_cast<unsigned short>(p[0] | (p[1] << 8));
  return __half2float(__ushort_as_half(bits));
}

// The 32 values of quant block `block` of a row of `type` (Q4_0, Q4_1, Q8_0, or F32
// where a "block" is 32 consecutive floats).
__device__ __forceinline__ void dequantize_block(GgmlType type, const std::uint8_t* row, std::int64_t block,
                                                 float out[32]) {
  switch (type) {
    case GgmlType::Q4_0: {
      const std::uint8_t* b = row + block * 18;
      const float d = load_f16(b);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        out[j] = float(int(b[2 + j] & 0xF) - 8) * d;
        out[j + 16] = float(int(b[2 + j] >> 4) - 8) * d;
      }
      return;
    }
    case GgmlType::Q4_1: {
      const std::uint8_t* b = row + block * 20;
      const float d = load_f16(b), m = load_f16(b + 2);
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        out[j] = float(b[4 + j] & 0xF) * d + m;
        out[j + 16] = float(b[4 + j] >> 4) * d + m;
      }
      return;
    }
    case GgmlType::Q8_0: {
      const std::uint8_t* b = row + block * 34;
      const float d = load_f16(b);
#pragma unroll
      for (int j = 0; j < 32; ++j) out[j] = float(static_cast<std::int8_t>(b[2 + j])) * d;
      return;
    }
    default: {  // F32
      const float* f = reinterpret_cast<const float*>(row) + block * 32;
#pragma unroll
      for (int j = 0; j < 32; ++j) out[j] = f[j];
      return;
    }
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

}  // namespace arbor::kernels::cuda

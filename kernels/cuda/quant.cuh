// Device-side reads of quantized weight blocks in the device layout (device_matrix.hpp:
// quants and scales in two planes; nvcc only). Values exactly as ggml's dequantize_row_*
// (and kernels/cpu/dequantize.cpp) define them.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/device_matrix.hpp"
#include "kernels/ggml_types.hpp"

namespace arbor::kernels::cuda {

// An f16 at a 2-byte aligned address.
__device__ __forceinline__ float load_f16(const std::uint8_t* p) {
  return __half2float(__ushort_as_half(*reinterpret_cast<const unsigned short*>(p)));
}

// Byte j (0..15) of 16 bytes read as one 128-bit load.
__device__ __forceinline__ unsigned byte_of(const uint4& v, int j) {
  const unsigned word = j < 4 ? v.x : j < 8 ? v.y : j < 12 ? v.z : v.w;
  return (word >> (8 * (j % 4))) & 0xFFu;
}

// The 32 values of block `block` of row `row` of a quantized matrix (Q4_0, Q4_1, Q8_0):
// its quants in one (Q4) or two (Q8_0) 128-bit loads, its scale(s) in one more.
__device__ __forceinline__ void dequantize_block(const DeviceMatrix& w, std::int64_t row, std::int64_t block,
                                                 float out[32]) {
  const BlockPlanes planes = block_planes(w.type);
  const std::int64_t blocks_per_row = w.cols / 32, index = row * blocks_per_row + block;
  const auto* base = static_cast<const std::uint8_t*>(w.data);
  const auto* quants = reinterpret_cast<const uint4*>(base + index * planes.quant_bytes);
  const std::uint8_t* scale = base + w.rows * blocks_per_row * planes.quant_bytes + index * planes.scale_bytes;
  switch (w.type) {
    case GgmlType::Q4_0: {
      const float d = load_f16(scale);
      const uint4 q = quants[0];
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const unsigned b = byte_of(q, j);
        out[j] = float(int(b & 0xF) - 8) * d;
        out[j + 16] = float(int(b >> 4) - 8) * d;
      }
      return;
    }
    case GgmlType::Q4_1: {
      const float d = load_f16(scale), m = load_f16(scale + 2);
      const uint4 q = quants[0];
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const unsigned b = byte_of(q, j);
        out[j] = float(b & 0xF) * d + m;
        out[j + 16] = float(b >> 4) * d + m;
      }
      return;
    }
    default: {  // Q8_0
      const float d = load_f16(scale);
      const uint4 lo = quants[0], hi = quants[1];
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        out[j] = float(static_cast<std::int8_t>(byte_of(lo, j))) * d;
        out[j + 16] = float(static_cast<std::int8_t>(byte_of(hi, j))) * d;
      }
      return;
    }
  }
}

// SwiGLU's gating of one value: silu(g) * u.
__device__ __forceinline__ float silu_times(float g, float u) { return g / (1.f + expf(-g)) * u; }

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

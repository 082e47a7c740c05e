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

// A weight block in registers: its quants (one 128-bit word for Q4_0/Q4_1, two for
// Q8_0) and scales (the GEMV loads several before it uses any).
template <GgmlType kType>
struct QuantBlock {
  static constexpr int kWords = kType == GgmlType::Q8_0 ? 2 : 1;
  uint4 q[kWords] = {};
  float d = 0.f, m = 0.f;  // m: Q4_1's minimum
};

// Block `index` (row * cols / 32 + block) of a matrix of type kType.
template <GgmlType kType>
__device__ __forceinline__ QuantBlock<kType> load_quant_block(const DeviceMatrix& w, std::int64_t index) {
  constexpr BlockPlanes planes = block_planes(kType);
  const auto* base = static_cast<const std::uint8_t*>(w.data);
  const auto* quants = reinterpret_cast<const uint4*>(base + index * planes.quant_bytes);
  const std::uint8_t* scale = base + w.rows * (w.cols / 32) * planes.quant_bytes + index * planes.scale_bytes;
  QuantBlock<kType> b;
#pragma unroll
  for (int k = 0; k < QuantBlock<kType>::kWords; ++k) b.q[k] = quants[k];
  b.d = load_f16(scale);
  if constexpr (kType == GgmlType::Q4_1) b.m = load_f16(scale + 2);
  return b;
}

// An integer 0..255 in byte k of `bytes` as a float, exactly, without a conversion
// instruction: the byte under an exponent of 2^23 (one byte permute), less 2^23 + bias.
__device__ __forceinline__ float byte_as_float(unsigned bytes, int k, float bias) {
  return __int_as_float(int(__byte_perm(bytes, 0x4B000000u, 0x7440u | unsigned(k)))) - (8388608.f + bias);
}

// 32-bit word k (0..3) of 16 bytes read as one 128-bit load.
__device__ __forceinline__ unsigned word_of(const uint4& v, int k) {
  return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

// The block's 32 values, as ggml's dequantize_row_* gives them, without an
// integer-to-float conversion (a quarter-rate instruction): each quant becomes a float
// by byte_as_float.
template <GgmlType kType>
__device__ __forceinline__ void block_values(const QuantBlock<kType>& b, float out[32]) {
  if constexpr (kType == GgmlType::Q8_0) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const unsigned word = word_of(b.q[k / 4], k % 4) ^ 0x80808080u;  // int8 + 128, per byte
#pragma unroll
      for (int i = 0; i < 4; ++i) out[4 * k + i] = byte_as_float(word, i, 128.f) * b.d;
    }
  } else {
    // Byte j of the quants: value j in its low nibble, value j + 16 in its high one.
    constexpr float bias = kType == GgmlType::Q4_0 ? 8.f : 0.f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const unsigned word = word_of(b.q[0], k), low = word & 0x0F0F0F0Fu, high = (word >> 4) & 0x0F0F0F0Fu;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if constexpr (kType == GgmlType::Q4_1) {
          out[4 * k + i] = byte_as_float(low, i, 0.f) * b.d + b.m;
          out[16 + 4 * k + i] = byte_as_float(high, i, 0.f) * b.d + b.m;
        } else {
          out[4 * k + i] = byte_as_float(low, i, bias) * b.d;
          out[16 + 4 * k + i] = byte_as_float(high, i, bias) * b.d;
        }
      }
    }
  }
}

// The 32 values of block `block` of row `row` of a quantized matrix (Q4_0, Q4_1, Q8_0):
// its quants in one (Q4) or two (Q8_0) 128-bit loads, its scale(s) in one more.
__device__ __forceinline__ void dequantize_block(const DeviceMatrix& w, std::int64_t row, std::int64_t block,
                                                 float out[32]) {
  const std::int64_t index = row * (w.cols / 32) + block;
  switch (w.type) {
    case GgmlType::Q4_0: return block_values(load_quant_block<GgmlType::Q4_0>(w, index), out);
    case GgmlType::Q4_1: return block_values(load_quant_block<GgmlType::Q4_1>(w, index), out);
    default: return block_values(load_quant_block<GgmlType::Q8_0>(w, index), out);
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

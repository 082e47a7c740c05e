// Internals shared by the matmul dispatcher (matmul.cpp) and its ISA-specific int8
// kernels. Not part of the kernels' public contract.
//
// Integer path for Q4_0/Q4_1/Q8_0: activations are quantized once per matmul to
// 8-bit blocks of 32 (xq, per-block scale dx and sx = dx * sum(xq)); every weight
// value is written as d * u + off with u an unsigned byte (Q4_1: u = nibble,
// off = m; Q4_0: u = nibble, off = -8d; Q8_0: u = q + 128, off = -128d), so that
//   sum_j w_j x_j  ~=  d * dx * sum_j u_j xq_j  +  off * sx
// and the inner product is a pure u8 x s8 dot (vpdpbusd / vpmaddubsw).
#pragma once

#include <cstdint>

#include "kernels/cpu/matmul.hpp"

namespace arbor::kernels::cpu::detail {

struct QuantizedActivations {
  std::int64_t m = 0;
  std::int64_t num_blocks = 0;  // per row
  const std::int8_t* qs = nullptr;  // [m][num_blocks * 32]
  const float* d = nullptr;         // [m][num_blocks]
  const float* s = nullptr;         // [m][num_blocks]: d * sum of the block's qs
};

// Quantizes rows [row_begin, row_end) of x ([m][cols], cols % 32 == 0).
void quantize_activations_avx2(const float* x, std::int64_t cols, std::int64_t row_begin,
                               std::int64_t row_end, std::int8_t* qs, float* d, float* s);

// y rows [0, xa.m), weight rows [row_begin, row_end). Q4_0, Q4_1 or Q8_0 only.
void matmul_q8_avx2(const WeightMatrix& w, const QuantizedActivations& xa, std::int64_t row_begin,
                    std::int64_t row_end, float* y);
// Same contract; row_begin must be a multiple of 16 (16-row interleaved tiles).
void matmul_q8_avx512(const WeightMatrix& w, const QuantizedActivations& xa,
                      std::int64_t row_begin, std::int64_t row_end, float* y);

}  // namespace arbor::kernels::cpu::detail

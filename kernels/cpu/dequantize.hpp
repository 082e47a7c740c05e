// Dequantization of ggml rows to f32, exactly as ggml's dequantize_row_* define the
// values (Q4_K/Q6_K follow ggml's dequantize_row_q4_K/q6_K). Scalar code the compiler
// vectorises; the matmul fast paths never dequantize Q4_0/Q4_1/Q8_0.
#pragma once

#include <cstdint>

#include "kernels/ggml_types.hpp"

namespace arbor::kernels::cpu {

// dst[0..n) = values of the row at `src` (n a multiple of the type's block size).
void dequantize_row(GgmlType type, const void* src, float* dst, std::int64_t n);

}  // namespace arbor::kernels::cpu

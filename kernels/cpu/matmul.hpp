// Products of activations (f32) with weight matrices stored in any GgmlType
// (kernels/weight_matrix.hpp), on the CPU.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/weight_matrix.hpp"

namespace arbor::kernels::cpu {

class ThreadPool;

// y[i][r] = sum_c x[i][c] * W[r][c] for i < m, r < w.rows.
// x: [m][w.cols] f32 row-major, y: [m][w.rows] f32 row-major (must not alias x).
// m == 1 is the decode case (GEMV, memory bound); m > 1 the prefill/batched case
// (GEMM, compute bound). Work is split over `pool`. Thread-safe for distinct y.
// Q4_0/Q4_1/Q8_0 run int8 kernels: x is quantized to 8-bit blocks of 32 per call.
// `precision` says how many 8-bit terms represent each activation block:
//  - accurate (default): two, x ~ d1*q1 + d2*q2 with q2 quantizing the residual of the
//    first (~16-bit activations). Results match the f32 reference to ~1e-4 relative;
//    costs about twice the integer work, which is hidden while decode is memory bound.
//  - fast: one, as llama.cpp quantizes activations (Q8_1). Up to 2x faster prefill, but
//    the rounding noise accumulates over layers (~0.2 logits on SmolLM2-135M) and can
//    flip near-tied greedy choices.
// The other types dequantize rows and use f32 FMAs (precision does not apply). An
// unsupported type or cols not a multiple of the block size is a caller bug: asserts
// in debug builds, y is zero-filled otherwise.
void matmul(const WeightMatrix& w, const float* x, std::int64_t m, float* y, ThreadPool& pool,
            MatmulPrecision precision = MatmulPrecision::accurate);

// The scalar reference: dequantize each row, then plain f32 dot products (single
// thread). Tests compare every fast path against it.
void matmul_reference(const WeightMatrix& w, const float* x, std::int64_t m, float* y);

// Copies row `row` of `w` into dst[w.cols] as f32 (embedding lookup).
void dequantize_row(const WeightMatrix& w, std::int64_t row, float* dst);

}  // namespace arbor::kernels::cpu

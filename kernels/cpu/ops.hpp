// Element-wise and row-wise ops of the transformer. Each has a SIMD path chosen at
// run time; `*_reference` are the scalar versions the tests compare against.
#pragma once

#include <cstdint>

namespace arbor::kernels::cpu {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], for one row of n values.
void rmsnorm(const float* x, const float* weight, int n, float eps, float* out);
void rmsnorm_reference(const float* x, const float* weight, int n, float eps, float* out);

// Rotates, in place, adjacent pairs (x[2i], x[2i+1]) of each of `num_heads` heads
// (head_dim values each, contiguous) by angle pos * theta^(-2i / rot_dim), for
// 2i < rot_dim (GGUF llama layout; rot_dim = head_dim for Llama).
void rope(float* x, int num_heads, int head_dim, int rot_dim, int pos, float theta);
void rope_reference(float* x, int num_heads, int head_dim, int rot_dim, int pos, float theta);

// gate[i] = silu(gate[i]) * up[i]   (SwiGLU)
void silu_mul(float* gate, const float* up, int n);
void silu_mul_reference(float* gate, const float* up, int n);

// x[i] += y[i]
void add_inplace(float* x, const float* y, int n);

// In-place numerically stable softmax of one row.
void softmax(float* x, int n);
void softmax_reference(float* x, int n);

// Index of the largest of x[0..n) (the lowest index among equal maxima; NaNs are
// skipped); -1 when n == 0, 0 when every value is NaN. Greedy sampling runs it over a
// vocabulary-sized row per sequence per step, on the scheduler's thread.
int argmax(const float* x, int n);
int argmax_reference(const float* x, int n);

// out[i] = e^((x[i] - shift) * scale) where x[i] is finite and >= floor, else 0, for
// i < n: sampling's weights (model/token_draw.hpp). AVX2 (simd::exp256, within a few ulp
// of std::exp; 0 where the exponent is below -87.3).
void masked_exp(const float* x, int n, float shift, float scale, float floor, float* out);

// f32 <-> f16 rows (KV cache stores f16).
void fp32_to_fp16_row(const float* src, std::uint16_t* dst, int n);
void fp16_to_fp32_row(const std::uint16_t* src, float* dst, int n);

}  // namespace arbor::kernels::cpu

// Drawing each row's next token where its logits are (model/token_draw.hpp states the
// rule; this is its device form): greedy rows take their argmax, sampled rows a
// temperature / top-k / top-p draw with the uniform number the host's RNG chose for
// them. One integer per row comes back instead of a vocabulary of floats, and the
// token can be the next step's input without visiting the host.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace arbor::kernels::cuda {

// One row's draw (model::TokenDraw in the kernel's terms; 4 words, so it travels in a
// step's int32 metadata).
struct RowDraw {
  float temperature = 0.0f;  // <= 0: greedy
  std::int32_t top_k = 0;    // 0: off; 1: greedy
  float top_p = 1.0f;        // >= 1: off
  float uniform = 0.0f;      // in [0, 1)
};
static_assert(sizeof(RowDraw) == 4 * sizeof(std::int32_t));

// Constrained rows (a JSON Schema's next tokens): row masked_rows[k] of x[..][0..n)
// keeps the logits that bit i % 32 of words[k * words_per_row + i / 32] allows; the
// others become -infinity, so draw_rows picks among the allowed only. Device memory.
void mask_rows(float* x, const std::int32_t* masked_rows, const std::uint32_t* words, int num_masked,
               int words_per_row, int n, cudaStream_t stream);

// out[r] = the token draws[r] picks from x[r][0..n): greedy, the largest value (lowest
// index among equal maxima, NaNs skipped, 0 when all are NaN: kernels::cpu::argmax);
// sampled, model/token_draw.hpp's rule, its masses summed in fixed point (2^-40 of the
// largest weight: deterministic, whatever order the threads add in). A sampled row of
// x is overwritten with its weights. `draws` lives in device memory. One block a row.
void draw_rows(float* x, const RowDraw* draws, int rows, int n, std::int32_t* out, cudaStream_t stream);

}  // namespace arbor::kernels::cuda

// How a token is drawn from a row of logits: the one rule every backend applies (the
// host Sampler, the CPU engine inside its step, the CUDA engine's sampling kernel), so
// a row sampled on a device picks what the host would have picked from the same
// logits and the same uniform draw (up to float rounding at a boundary).
//
// The rule, for logits l over a vocabulary of V:
// 1. greedy() (temperature <= 0 or top_k == 1): the argmax (lowest id among equal
//    maxima, NaNs skipped).
// 2. top_k in 1..V-1: keep the tokens whose logit is at least the k-th largest logit
//    (tokens tied with the k-th are all kept; NaN never counts).
// 3. Weights w_i = exp((l_i - max l) / temperature) for the kept tokens (AVX2:
//    kernels::cpu::masked_exp); NaN and infinite logits weigh 0, and so do the tokens
//    step 2 dropped. (A +infinity maximum takes all the mass: the argmax.)
// 4. top_p < 1: of the tokens that weigh more than 0, keep the tokens whose weight is at least the largest weight
//    v for which the kept weights >= v sum to p of the kept mass or more (the smallest
//    most-probable set reaching p; ties at its edge all kept; p = 0: the maxima only).
// 5. With M the kept mass, the first kept token in id order at which the running sum
//    of kept weights exceeds uniform * M (rounding past the end: the last kept one).
// The uniform number comes from the sequence's RNG (model::Sampler::next_draw), one per
// sampled token, so a draw can be made before the logits exist (a device samples a
// row whose logits never leave it). Sorting-free: O(V) expected, against O(V log V)
// for a sort by probability (4.3 ms a row of 49,152 before; BENCHMARKS.md).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace arbor::model {

struct TokenDraw {
  float temperature = 0.0f;  // <= 0: greedy
  int top_k = 0;             // 0: off; 1: greedy
  float top_p = 1.0f;        // >= 1: off
  double uniform = 0.0;      // in [0, 1): the draw; unused when greedy
  bool greedy() const { return temperature <= 0.0f || top_k == 1; }
};

// The token `draw` picks from `logits` (the rule above); -1 for empty logits.
// `scratch` is reused between calls (no allocation once it has grown).
std::int32_t draw_token(std::span<const float> logits, const TokenDraw& draw, std::vector<float>& scratch);

// The weight threshold of step 4: the largest v among `weights` such that the weights
// >= v sum to at least `target` (the smallest of them when the whole sum falls short of
// `target`, by rounding). Reorders `weights`; an empty span gives 0.
float mass_threshold(std::span<float> weights, double target);

}  // namespace arbor::model

// Token sampling from logits: greedy, temperature, top-k, top-p, with a deterministic
// per-sequence RNG (same seed + same logits -> same tokens, on every platform: the RNG
// and the draw are Arbor's own, not <random>'s implementation-defined distributions).
//
// sample(logits) draws with model/token_draw.hpp's rule (temperature, top-k, top-p;
// greedy when temperature <= 0 or top_k == 1), taking one uniform number from the
// sequence's RNG per sampled token. next_draw() hands that draw out instead, for a
// backend that samples the row where its logits are (the engine's LogitsMode::last_token).
// Settings: SamplingSettings (common/sampling_settings.hpp); the Sampler reads
// temperature, top_k, top_p and seed (temperature and top_p as float).
// A Sampler holds one sequence's RNG state: not thread-safe, one per sequence.
// Cost: O(V) greedy; O(V) expected otherwise (no sort).
//
// Constrained decoding (json_constraint.hpp): sample(logits, allowed) runs the same
// pipeline with every token outside `allowed` at -infinity before temperature, top-k
// and top-p, so it only ever returns an allowed token (when few are allowed, over
// their logits only: the same distribution, at O(allowed) cost). Without a mask
// nothing changes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/sampling_settings.hpp"
#include "model/token_draw.hpp"

namespace arbor::model {

class TokenMask;

// xoshiro256** seeded through splitmix64.
class SamplerRng {
 public:
  explicit SamplerRng(std::uint64_t seed);
  std::uint64_t next();
  double uniform();  // [0, 1), 53 random bits

 private:
  std::uint64_t s_[4];
};

// Index of the largest logit (the lowest index among equal maxima, NaNs skipped); -1
// when empty. Vectorized (kernels/cpu/ops.hpp): at batch 64 it was most of a step's
// host work.
std::int32_t argmax(std::span<const float> logits);

class Sampler {
 public:
  explicit Sampler(const SamplingSettings& settings);
  // Picks the next token; advances the RNG unless greedy. -1 for empty logits.
  std::int32_t sample(std::span<const float> logits);
  // Picks among `allowed` only (same RNG use as sample()); -1 when nothing is allowed.
  std::int32_t sample(std::span<const float> logits, const TokenMask& allowed);
  // This sequence's next draw (its settings and, unless greedy, the RNG's next uniform
  // number): sample(logits) is draw_token(logits, next_draw()).
  TokenDraw next_draw();

 private:
  float temperature_;
  int top_k_;
  float top_p_;
  SamplerRng rng_;
  std::vector<float> masked_;   // scratch for masked sampling
  std::vector<float> weights_;  // draw_token's scratch
};

}  // namespace arbor::model

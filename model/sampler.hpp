// Token sampling from logits: greedy, temperature, top-k, top-p, with a deterministic
// per-sequence RNG (same seed + same logits -> same tokens, on every platform: the RNG
// and the draw are Arbor's own, not <random>'s implementation-defined distributions).
//
// Pipeline (sample): temperature <= 0 or top_k == 1 -> argmax. Otherwise softmax of
// logits / temperature, keep the top_k most probable (0 = all), renormalise, keep the
// smallest most-probable prefix whose mass >= top_p, draw with the RNG.
// Settings: SamplingSettings (common/sampling_settings.hpp); the Sampler reads
// temperature, top_k, top_p and seed (temperature and top_p as float).
// A Sampler holds one sequence's RNG state: not thread-safe, one per sequence.
// Cost: O(V) greedy; O(V log k) with top_k, O(V log V) with top_p only.
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

struct TokenProb {
  std::int32_t id;
  float prob;
};

// Index of the largest logit (the lowest index among equal maxima, NaNs skipped); -1
// when empty. Vectorized (kernels/cpu/ops.hpp): at batch 64 it was most of a step's
// host work.
std::int32_t argmax(std::span<const float> logits);
// softmax(logits / temperature), sorted by probability descending (ties: lower id first).
std::vector<TokenProb> softmax_candidates(std::span<const float> logits, float temperature);
// Keep the k most probable (k <= 0: all) and renormalise. Input sorted as above.
void keep_top_k(std::vector<TokenProb>& candidates, int k);
// Keep the smallest prefix whose probability mass is >= p, and renormalise.
void keep_top_p(std::vector<TokenProb>& candidates, float p);

class Sampler {
 public:
  explicit Sampler(const SamplingSettings& settings);
  // Picks the next token; advances the RNG unless greedy. -1 for empty logits.
  std::int32_t sample(std::span<const float> logits);
  // Picks among `allowed` only (same RNG use as sample()); -1 when nothing is allowed.
  std::int32_t sample(std::span<const float> logits, const TokenMask& allowed);
  bool is_greedy() const { return temperature_ <= 0.0f || top_k_ == 1; }

 private:
  float temperature_;
  int top_k_;
  float top_p_;
  SamplerRng rng_;
  std::vector<float> masked_;  // scratch for masked sampling
};

}  // namespace arbor::model

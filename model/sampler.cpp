#include "model/sampler.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/ops.hpp"
#include "model/token_mask.hpp"

namespace arbor::model {

namespace {

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

SamplerRng::SamplerRng(std::uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

std::uint64_t SamplerRng::next() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double SamplerRng::uniform() { return double(next() >> 11) * 0x1.0p-53; }

std::int32_t argmax(std::span<const float> logits) {
  return kernels::cpu::argmax(logits.data(), int(logits.size()));
}

Sampler::Sampler(const SamplingSettings& settings)
    : temperature_(float(settings.temperature)),
      top_k_(settings.top_k),
      top_p_(float(settings.top_p)),
      rng_(settings.seed) {}

TokenDraw Sampler::next_draw() {
  TokenDraw draw{temperature_, top_k_, top_p_};
  if (!draw.greedy()) draw.uniform = rng_.uniform();
  return draw;
}

std::int32_t Sampler::sample(std::span<const float> logits) {
  if (logits.empty()) return -1;
  return draw_token(logits, next_draw(), weights_);
}

std::int32_t Sampler::sample(std::span<const float> logits, const TokenMask& allowed) {
  const std::int32_t num_allowed = allowed.count();
  if (num_allowed == 0) return -1;
  if (std::size_t(num_allowed) * 4 < logits.size()) {
    // Few allowed: the same pipeline over their logits only (the masked ones would
    // have probability 0 anyway), in id order so that ties break the same way.
    const auto ids = allowed.ids();
    masked_.clear();
    for (std::int32_t id : ids)
      if (std::size_t(id) < logits.size()) masked_.push_back(logits[std::size_t(id)]);
    const std::int32_t i = sample(masked_);
    return i >= 0 ? ids[std::size_t(i)] : -1;
  }
  masked_.assign(logits.begin(), logits.end());
  allowed.apply(masked_);
  const std::int32_t best = argmax(masked_);
  if (best < 0 || !allowed.allows(best)) return -1;
  const std::int32_t id = sample(masked_);
  // The draw's rounding fallback may land on a zero-probability (masked) token.
  return allowed.allows(id) ? id : best;
}

}  // namespace arbor::model

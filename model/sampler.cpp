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

bool more_probable(const TokenProb& a, const TokenProb& b) {
  return a.prob != b.prob ? a.prob > b.prob : a.id < b.id;
}

void renormalise(std::vector<TokenProb>& c) {
  double sum = 0;
  for (const auto& t : c) sum += t.prob;
  if (sum <= 0) return;
  for (auto& t : c) t.prob = float(t.prob / sum);
}

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

std::vector<TokenProb> softmax_candidates(std::span<const float> logits, float temperature) {
  std::vector<TokenProb> c;
  if (logits.empty()) return c;
  const float inv_t = 1.0f / (temperature > 0 ? temperature : 1.0f);
  const float max = logits[argmax(logits)];
  c.reserve(logits.size());
  double sum = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    const float p = std::isfinite(logits[i]) || logits[i] == max ? std::exp((logits[i] - max) * inv_t) : 0.0f;
    c.push_back({std::int32_t(i), p});
    sum += p;
  }
  for (auto& t : c) t.prob = float(t.prob / sum);
  std::sort(c.begin(), c.end(), more_probable);
  return c;
}

void keep_top_k(std::vector<TokenProb>& c, int k) {
  if (k <= 0 || std::size_t(k) >= c.size()) return;
  c.resize(std::size_t(k));
  renormalise(c);
}

void keep_top_p(std::vector<TokenProb>& c, float p) {
  if (p >= 1.0f || c.empty()) return;
  double mass = 0;
  std::size_t n = 0;
  while (n < c.size()) {
    mass += c[n].prob;
    ++n;
    if (mass >= double(p)) break;
  }
  c.resize(std::max<std::size_t>(n, 1));
  renormalise(c);
}

Sampler::Sampler(const SamplingSettings& settings)
    : temperature_(float(settings.temperature)),
      top_k_(settings.top_k),
      top_p_(float(settings.top_p)),
      rng_(settings.seed) {}

std::int32_t Sampler::sample(std::span<const float> logits) {
  if (logits.empty()) return -1;
  if (is_greedy()) return argmax(logits);
  std::vector<TokenProb> c;
  if (top_k_ > 0 && std::size_t(top_k_) < logits.size()) {
    // Only the top k matter: select them before the softmax sort (O(V log k)).
    std::vector<std::int32_t> ids(logits.size());
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = std::int32_t(i);
    std::partial_sort(ids.begin(), ids.begin() + top_k_, ids.end(),
                      [&](std::int32_t a, std::int32_t b) {
                        return logits[a] != logits[b] ? logits[a] > logits[b] : a < b;
                      });
    std::vector<float> top(static_cast<std::size_t>(top_k_));
    for (int i = 0; i < top_k_; ++i) top[i] = logits[ids[i]];
    c = softmax_candidates(top, temperature_);
    for (auto& t : c) t.id = ids[t.id];
  } else {
    c = softmax_candidates(logits, temperature_);
  }
  keep_top_p(c, top_p_);
  const double u = rng_.uniform();
  double cumulative = 0;
  for (const auto& t : c) {
    cumulative += t.prob;
    if (u < cumulative) return t.id;
  }
  return c.back().id;  // rounding left u just above the total
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

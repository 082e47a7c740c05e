#include "model/token_draw.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <functional>

#include "kernels/cpu/ops.hpp"

namespace arbor::model {

float mass_threshold(std::span<float> weights, double target) {
  auto first = weights.begin(), last = weights.end();
  double above = 0;  // the mass of the weights greater than every one in [first, last)
  float smallest = 0;
  while (first != last) {
    const float a = *first, b = *(first + (last - first) / 2), c = *(last - 1);
    const float pivot = std::max(std::min(a, b), std::min(std::max(a, b), c));  // median of three
    const auto greater_end = std::partition(first, last, [&](float w) { return w > pivot; });
    const auto equal_end = std::partition(greater_end, last, [&](float w) { return w == pivot; });
    double greater = 0;
    for (auto it = first; it != greater_end; ++it) greater += *it;
    const double equal = double(equal_end - greater_end) * double(pivot);
    if (greater_end != first && above + greater >= target) {
      last = greater_end;  // the threshold lies above the pivot
    } else if (above + greater + equal >= target) {
      return pivot;
    } else {
      above += greater + equal;
      smallest = pivot;
      first = equal_end;
    }
  }
  return smallest;
}

namespace {

// Step 2's cut: the k-th largest logit (NaNs never count), -infinity when top_k is off.
// A small k keeps a heap of the k largest (most logits are rejected at its top).
float top_k_logit(std::span<const float> logits, int top_k, std::span<float> work) {
  if (top_k <= 0 || std::size_t(top_k) >= logits.size()) return -INFINITY;
  auto key = [](float x) { return std::isnan(x) ? -INFINITY : x; };
  auto larger = [&](float a, float b) { return key(a) > key(b); };
  const std::size_t k = std::size_t(top_k);
  if (k * 8 < logits.size()) {
    std::partial_sort_copy(logits.begin(), logits.end(), work.begin(), work.begin() + std::ptrdiff_t(k), larger);
    return key(work[k - 1]);
  }
  for (std::size_t i = 0; i < logits.size(); ++i) work[i] = key(logits[i]);
  const auto kth = work.begin() + std::ptrdiff_t(k - 1);
  std::nth_element(work.begin(), kth, work.begin() + std::ptrdiff_t(logits.size()), std::greater<float>());
  return *kth;
}

// Step 4: the smallest weight a token may have and be drawn (0: every weighed token).
// Weights lie in (0, 1]: their mass by binary exponent, summed from the top, says in
// which exponent the cut lies, so only the weights of that one go through
// mass_threshold.
float top_p_weight(std::span<const float> w, float top_p, std::span<float> work) {
  if (top_p >= 1.0f) return 0;
  constexpr int kExponents = 256;
  auto exponent = [](float x) { return int(std::bit_cast<std::uint32_t>(x) >> 23) & 0xff; };
  std::array<double, kExponents> mass_at{};
  double mass = 0;
  for (float x : w)
    if (x > 0) {
      mass_at[std::size_t(exponent(x))] += x;
      mass += x;
    }
  const double target = double(std::max(top_p, 0.0f)) * mass;
  double above = 0;
  for (int e = kExponents - 1; e >= 0; --e) {
    if (mass_at[std::size_t(e)] == 0 || above + mass_at[std::size_t(e)] < target) {
      above += mass_at[std::size_t(e)];
      continue;
    }
    std::size_t n = 0;
    for (float x : w)
      if (x > 0 && exponent(x) == e) work[n++] = x;
    return mass_threshold(work.first(n), target - above);
  }
  return 0;  // rounding left the target above the whole mass: every weighed token
}

}  // namespace

std::int32_t draw_token(std::span<const float> logits, const TokenDraw& draw, std::vector<float>& scratch) {
  if (logits.empty()) return -1;
  if (draw.greedy()) return kernels::cpu::argmax(logits.data(), int(logits.size()));
  const std::size_t vocab = logits.size();
  scratch.resize(2 * vocab);
  const std::span<float> w(scratch.data(), vocab), work(scratch.data() + vocab, vocab);
  const std::int32_t best = kernels::cpu::argmax(logits.data(), int(vocab));
  const float max = logits[std::size_t(best)];
  if (!std::isfinite(max)) return best;  // all NaN (0), or an infinite logit takes all the mass
  const float min_logit = top_k_logit(logits, draw.top_k, work);
  // Step 3: the weights of the tokens step 2 keeps (the others weigh 0).
  kernels::cpu::masked_exp(logits.data(), int(vocab), max, 1.0f / draw.temperature, min_logit, w.data());
  const float threshold = top_p_weight(w, draw.top_p, work);
  auto kept = [&](float x) { return x >= threshold && x > 0; };
  double mass = 0;
  for (float x : w)
    if (kept(x)) mass += x;
  const double target = draw.uniform * mass;
  double running = 0;
  std::int32_t last_kept = 0;
  for (std::size_t i = 0; i < vocab; ++i) {
    if (!kept(w[i])) continue;
    running += w[i];
    last_kept = std::int32_t(i);
    if (running > target) return last_kept;
  }
  return last_kept;
}

}  // namespace arbor::model

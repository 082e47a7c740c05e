#include "model/sampler.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <functional>
#include <map>
#include <utility>

#include "kernels/cpu/ops.hpp"

namespace arbor::model {
namespace {

std::vector<float> logits_of(std::initializer_list<double> probs) {
  std::vector<float> out;
  for (double p : probs) out.push_back(float(std::log(p)));
  return out;
}

TEST(Sampler, GreedyPicksArgmax) {
  const std::vector<float> logits = {0.1f, 2.5f, -1.0f, 2.4f, 2.5f};
  EXPECT_EQ(argmax(logits), 1);  // first of equal maxima
  Sampler greedy({.temperature = 0.0});
  EXPECT_EQ(greedy.sample(logits), 1);
  const std::vector<float> neg = {-5.0f, -3.0f, -4.0f};
  EXPECT_EQ(greedy.sample(neg), 1);
  EXPECT_EQ(greedy.sample({}), -1);
}

TEST(Sampler, TopKOneEqualsGreedy) {
  std::vector<float> logits(1000);
  SamplerRng rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    for (auto& l : logits) l = float(rng.uniform() * 10.0);
    Sampler s({.temperature = 1.5, .top_k = 1, .seed = std::uint64_t(trial)});
    EXPECT_EQ(s.sample(logits), argmax(logits));
  }
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDiffers) {
  std::vector<float> logits(500);
  for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = float(std::sin(double(i)) * 3.0);
  auto run = [&](std::uint64_t seed) {
    Sampler s({.temperature = 1.0, .top_p = 0.95, .top_k = 40, .seed = seed});
    std::vector<std::int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(logits));
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
  // Fixed values: the RNG is Arbor's own, so these hold on every platform.
  SamplerRng rng(0);
  const std::uint64_t a = rng.next(), b = rng.next();
  SamplerRng again(0);
  EXPECT_EQ(again.next(), a);
  EXPECT_EQ(again.next(), b);
  EXPECT_NE(a, b);
}

// How often each token is drawn when the uniform number sweeps [0, 1) evenly: the
// rule's probabilities, without the noise of random draws.
std::map<std::int32_t, double> swept_shares(const std::vector<float>& logits, TokenDraw draw) {
  std::map<std::int32_t, double> shares;
  std::vector<float> scratch;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    draw.uniform = (i + 0.5) / n;
    shares[draw_token(logits, draw, scratch)] += 1.0 / n;
  }
  return shares;
}

TEST(Sampler, TopPKeepsSmallestSetReachingP) {
  const auto logits = logits_of({0.1, 0.4, 0.2, 0.3});
  auto shares = swept_shares(logits, {.temperature = 1.0f, .top_p = 0.65f});  // 0.4 < 0.65 <= 0.4 + 0.3
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_NEAR(shares[1], 0.4 / 0.7, 1e-3);
  EXPECT_NEAR(shares[3], 0.3 / 0.7, 1e-3);
  EXPECT_EQ(swept_shares(logits, {.temperature = 1.0f, .top_p = 0.39f}).size(), 1u);  // 0.4 alone reaches it
  EXPECT_EQ(swept_shares(logits, {.temperature = 1.0f, .top_p = 0.75f}).size(), 3u);  // 0.7 < 0.75
  EXPECT_EQ(swept_shares(logits, {.temperature = 1.0f, .top_p = 0.0f}).size(), 1u);
  shares = swept_shares(logits, {.temperature = 1.0f, .top_k = 2});
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_NEAR(shares[1] + shares[3], 1.0, 1e-9);
}

TEST(Sampler, TopPNeverSamplesOutsideTheNucleus) {
  const auto logits = logits_of({0.05, 0.5, 0.05, 0.3, 0.1});
  Sampler s({.temperature = 1.0, .top_p = 0.75, .seed = 3});
  std::map<std::int32_t, int> counts;
  for (int i = 0; i < 4000; ++i) ++counts[s.sample(logits)];
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_GT(counts[1], 2200);  // expected 0.5/0.8 = 62.5%
  EXPECT_GT(counts[3], 1200);  // expected 37.5%
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  const auto logits = logits_of({0.6, 0.3, 0.1});
  // T = 0.5 squares the probabilities: 0.36 / (0.36 + 0.09 + 0.01).
  EXPECT_NEAR(swept_shares(logits, {.temperature = 0.5f})[0], 0.36 / 0.46, 1e-3);
  EXPECT_LT(swept_shares(logits, {.temperature = 2.0f})[0], 0.55);
}

TEST(Sampler, SamplingFollowsTheDistribution) {
  const auto logits = logits_of({0.2, 0.5, 0.3});
  Sampler s({.temperature = 1.0, .seed = 99});
  std::map<std::int32_t, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[s.sample(logits)];
  EXPECT_NEAR(counts[0] / double(n), 0.2, 0.02);
  EXPECT_NEAR(counts[1] / double(n), 0.5, 0.02);
  EXPECT_NEAR(counts[2] / double(n), 0.3, 0.02);
}

// The rule of model/token_draw.hpp written the slow way: weights sorted by size (ties by
// id), top-k and top-p cut in that order, the draw walked in id order.
std::int32_t reference_draw(const std::vector<float>& logits, const TokenDraw& draw) {
  if (draw.greedy()) return argmax(logits);
  const float max = logits[std::size_t(argmax(logits))];
  if (!std::isfinite(max)) return argmax(logits);  // no finite logit: nothing weighs
  std::vector<float> by_logit;
  for (float l : logits) by_logit.push_back(std::isnan(l) ? -INFINITY : l);
  std::sort(by_logit.begin(), by_logit.end(), std::greater<float>());
  const float min_logit =
      draw.top_k > 0 && std::size_t(draw.top_k) < logits.size() ? by_logit[std::size_t(draw.top_k) - 1] : -INFINITY;
  std::vector<std::pair<float, std::int32_t>> sorted;
  std::vector<float> w(logits.size());
  // The weights as the rule computes them (kernels::cpu::masked_exp, tested against
  // std::exp in tests/kernels): this reference checks the cuts and the draw.
  kernels::cpu::masked_exp(logits.data(), int(logits.size()), max, 1.0f / draw.temperature, min_logit, w.data());
  for (std::size_t i = 0; i < logits.size(); ++i) sorted.push_back({w[i], std::int32_t(i)});
  std::sort(sorted.begin(), sorted.end(), [](auto a, auto b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
  float threshold = 0;
  if (draw.top_p < 1) {
    double kept = 0, running = 0;
    for (auto [x, id] : sorted)
      if (x >= threshold && x > 0) kept += x;
    for (auto [x, id] : sorted) {
      if (x < threshold || x <= 0) break;
      running += x;
      if (running >= double(draw.top_p) * kept) {
        threshold = x;
        break;
      }
    }
  }
  double mass = 0, running = 0;
  for (float x : w)
    if (x >= threshold && x > 0) mass += x;
  std::int32_t last = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (w[i] < threshold || w[i] <= 0) continue;
    last = std::int32_t(i);
    running += w[i];
    if (running > draw.uniform * mass) return last;
  }
  return last;
}

TEST(TokenDraw, MatchesTheSortedReferenceOnRandomRows) {
  SamplerRng rng(11);
  std::vector<float> scratch;
  int sampled_distinct = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t vocab = 1 + std::size_t(rng.next() % 3000);
    std::vector<float> logits(vocab);
    for (auto& l : logits) l = float(std::round(rng.uniform() * 40.0 - 20.0) / 4.0);  // many ties
    if (trial % 7 == 0) logits[rng.next() % vocab] = -INFINITY;
    if (trial % 11 == 0) logits[rng.next() % vocab] = NAN;
    const TokenDraw draw{.temperature = float(0.2 + 2.0 * rng.uniform()),
                         .top_k = trial % 3 == 0 ? 0 : int(rng.next() % (vocab + 2)),
                         .top_p = trial % 4 == 0 ? 1.0f : float(rng.uniform()),
                         .uniform = rng.uniform()};
    const std::int32_t got = draw_token(logits, draw, scratch);
    EXPECT_EQ(got, reference_draw(logits, draw)) << "trial " << trial << " vocab " << vocab;
    sampled_distinct += got != argmax(logits);
  }
  EXPECT_GT(sampled_distinct, 50) << "the draws never leave the argmax: the test would not see a wrong cut";
}

TEST(TokenDraw, MassThresholdFindsTheSmallestHeaviestSet) {
  std::vector<float> w = {0.1f, 0.4f, 0.2f, 0.3f};
  EXPECT_EQ(mass_threshold(w, 0.0), 0.4f);
  w = {0.1f, 0.4f, 0.2f, 0.3f};
  EXPECT_EQ(mass_threshold(w, 0.65), 0.3f);
  w = {0.1f, 0.4f, 0.2f, 0.3f};
  EXPECT_EQ(mass_threshold(w, 0.9), 0.2f);
  w = {0.1f, 0.4f, 0.2f, 0.3f};
  EXPECT_EQ(mass_threshold(w, 2.0), 0.1f);  // more than there is: everything
  w = {0.25f, 0.25f, 0.25f, 0.25f};
  EXPECT_EQ(mass_threshold(w, 0.3), 0.25f);  // ties at the edge: all kept
  EXPECT_EQ(mass_threshold({}, 1.0), 0.0f);
}

}  // namespace
}  // namespace arbor::model

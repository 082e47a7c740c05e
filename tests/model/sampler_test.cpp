#include "model/sampler.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

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

TEST(Sampler, TopPKeepsSmallestSetReachingP) {
  auto c = softmax_candidates(logits_of({0.1, 0.4, 0.2, 0.3}), 1.0f);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].id, 1);
  EXPECT_EQ(c[1].id, 3);
  EXPECT_EQ(c[2].id, 2);
  EXPECT_NEAR(c[0].prob, 0.4, 1e-6);
  auto p = c;
  keep_top_p(p, 0.65f);  // 0.4 < 0.65 <= 0.4 + 0.3
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].id, 1);
  EXPECT_EQ(p[1].id, 3);
  EXPECT_NEAR(p[0].prob, 0.4 / 0.7, 1e-6);
  p = c;
  keep_top_p(p, 0.39f);  // the top token alone has mass 0.4 >= 0.39
  EXPECT_EQ(p.size(), 1u);
  p = c;
  keep_top_p(p, 0.75f);  // 0.7 < 0.75: needs a third
  EXPECT_EQ(p.size(), 3u);
  p = c;
  keep_top_p(p, 0.01f);
  EXPECT_EQ(p.size(), 1u);
  p = c;
  keep_top_k(p, 2);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_NEAR(p[0].prob + p[1].prob, 1.0, 1e-6);
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
  auto cold = softmax_candidates(logits, 0.5f);
  auto hot = softmax_candidates(logits, 2.0f);
  EXPECT_GT(cold[0].prob, 0.6f);
  EXPECT_LT(hot[0].prob, 0.6f);
  // T = 0.5 squares the probabilities: 0.36 / (0.36 + 0.09 + 0.01).
  EXPECT_NEAR(cold[0].prob, 0.36 / 0.46, 1e-5);
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

}  // namespace
}  // namespace arbor::model

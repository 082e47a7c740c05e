#include "kernels/cpu/ops.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/ggml_types.hpp"
#include "kernels/cpu/fp16.hpp"
#include "kernel_test_util.hpp"

namespace arbor::kernels::cpu {
namespace {

using testing::random_floats;

constexpr int kSizes[] = {1, 7, 8, 9, 33, 64, 576, 1001};

void expect_close(const std::vector<float>& a, const std::vector<float>& b, float rel, float abs) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_NEAR(a[i], b[i], rel * std::fabs(b[i]) + abs) << "index " << i;
}

TEST(Ops, RmsnormMatchesReference) {
  std::mt19937 rng(1);
  for (int n : kSizes) {
    const auto x = random_floats(rng, n, -3.f, 3.f), w = random_floats(rng, n);
    std::vector<float> y(n), ref(n);
    rmsnorm(x.data(), w.data(), n, 1e-5f, y.data());
    rmsnorm_reference(x.data(), w.data(), n, 1e-5f, ref.data());
    expect_close(y, ref, 1e-5f, 1e-6f);
  }
}

TEST(Ops, RmsnormKnownValues) {
  const float x[4] = {1.f, -1.f, 1.f, -1.f}, w[4] = {1.f, 2.f, 3.f, 4.f};
  float y[4];
  rmsnorm(x, w, 4, 0.f, y);
  EXPECT_FLOAT_EQ(y[0], 1.f);
  EXPECT_FLOAT_EQ(y[1], -2.f);
  EXPECT_FLOAT_EQ(y[3], -4.f);
}

TEST(Ops, RopeMatchesReference) {
  std::mt19937 rng(2);
  for (int pos : {0, 1, 17, 1000, 8191}) {
    for (int head_dim : {64, 10, 6}) {
      const int heads = 3;
      auto x = random_floats(rng, heads * head_dim);
      auto ref = x;
      rope(x.data(), heads, head_dim, head_dim, pos, 100000.f);
      rope_reference(ref.data(), heads, head_dim, head_dim, pos, 100000.f);
      expect_close(x, ref, 1e-5f, 2e-6f);
    }
  }
}

TEST(Ops, RopeRotatesAdjacentPairs) {
  // pos 1, pair 0 turns by exactly 1 radian; pair 1 by theta^(-2/4) = 0.01 for theta 1e4.
  float x[4] = {1.f, 0.f, 1.f, 0.f};
  rope(x, 1, 4, 4, 1, 10000.f);
  EXPECT_NEAR(x[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(1.0), 1e-6);
  EXPECT_NEAR(x[2], std::cos(0.01), 1e-6);
  EXPECT_NEAR(x[3], std::sin(0.01), 1e-6);
  // Partial rotation: dims past rot_dim are untouched.
  float y[4] = {1.f, 2.f, 3.f, 4.f};
  rope(y, 1, 4, 2, 3, 10000.f);
  EXPECT_EQ(y[2], 3.f);
  EXPECT_EQ(y[3], 4.f);
}

TEST(Ops, SiluMulMatchesReference) {
  std::mt19937 rng(3);
  for (int n : kSizes) {
    auto g = random_floats(rng, n, -20.f, 20.f);
    const auto up = random_floats(rng, n, -2.f, 2.f);
    auto ref = g;
    silu_mul(g.data(), up.data(), n);
    silu_mul_reference(ref.data(), up.data(), n);
    expect_close(g, ref, 2e-6f, 1e-7f);
  }
  float big[8] = {-100.f, -90.f, 100.f, 0.f, 1.f, -1.f, 50.f, -50.f}, ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
  silu_mul(big, ones, 8);
  EXPECT_NEAR(big[0], 0.f, 1e-30f);  // -100 * e^-100
  EXPECT_FLOAT_EQ(big[2], 100.f);
  EXPECT_EQ(big[3], 0.f);
  EXPECT_NEAR(big[4], 0.7310586f, 1e-6f);
}

TEST(Ops, SoftmaxMatchesReference) {
  std::mt19937 rng(4);
  for (int n : kSizes) {
    auto x = random_floats(rng, n, -30.f, 30.f);
    auto ref = x;
    softmax(x.data(), n);
    softmax_reference(ref.data(), n);
    expect_close(x, ref, 1e-5f, 1e-9f);
  }
  float inf_row[9] = {-INFINITY, 0.f, -INFINITY, 0.f, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  softmax(inf_row, 9);
  EXPECT_EQ(inf_row[0], 0.f);
  EXPECT_FLOAT_EQ(inf_row[1], 0.5f);
}

TEST(Ops, AddInplace) {
  std::mt19937 rng(5);
  for (int n : kSizes) {
    auto x = random_floats(rng, n);
    const auto y = random_floats(rng, n);
    auto ref = x;
    for (int i = 0; i < n; ++i) ref[i] += y[i];
    add_inplace(x.data(), y.data(), n);
    EXPECT_EQ(x, ref);
  }
}

TEST(Ops, ArgmaxMatchesReference) {
  std::mt19937 rng(7);
  std::vector<int> sizes(std::begin(kSizes), std::end(kSizes));
  sizes.push_back(49152);  // SmolLM2's vocabulary
  for (int n : sizes) {
    for (int trial = 0; trial < 20; ++trial) {
      // Few distinct values, so maxima repeat (ties go to the lowest index), with
      // -inf (masked tokens) and NaN sprinkled in.
      auto x = random_floats(rng, n, -4.f, 4.f);
      for (auto& v : x) v = std::round(v);
      for (int k = 0; k < n / 5; ++k) x[rng() % n] = -INFINITY;
      if (trial % 2 == 1) x[rng() % n] = NAN;
      if (trial % 4 == 3) x[rng() % n] = 9.f;  // one clear winner, anywhere (tail too)
      ASSERT_EQ(argmax(x.data(), n), argmax_reference(x.data(), n)) << "n " << n << " trial " << trial;
    }
  }
}

TEST(Ops, ArgmaxEdgeCases) {
  EXPECT_EQ(argmax(nullptr, 0), -1);
  const float ties[10] = {1, 3, 2, 3, 0, 0, 0, 0, 3, 3};
  EXPECT_EQ(argmax(ties, 10), 1);
  float tail[11] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};  // the max past the last full vector
  EXPECT_EQ(argmax(tail, 11), 10);
  const float masked[9] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY,
                           -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  EXPECT_EQ(argmax(masked, 9), 0);
  const float nans[9] = {NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN};
  EXPECT_EQ(argmax(nans, 9), 0);
  const float nan_first[9] = {NAN, -1, -2, -3, -4, -5, -6, -7, -0.5f};
  EXPECT_EQ(argmax(nan_first, 9), 8);
  EXPECT_EQ(argmax_reference(nan_first, 9), 8);
}

TEST(Ops, Fp16RowsMatchScalarConversion) {
  std::mt19937 rng(6);
  for (int n : kSizes) {
    const auto x = random_floats(rng, n, -70000.f, 70000.f);
    std::vector<std::uint16_t> h(n);
    fp32_to_fp16_row(x.data(), h.data(), n);
    std::vector<float> back(n);
    fp16_to_fp32_row(h.data(), back.data(), n);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(h[i], fp32_to_fp16_scalar(x[i])) << i;
      ASSERT_EQ(back[i], fp16_to_fp32_scalar(h[i])) << i;
    }
  }
}

// Sampling's weights: e^((x - shift) * scale) within a few ulp of std::exp, in vector
// body and tail alike; 0 for NaN, infinities and values below the floor.
TEST(Ops, MaskedExpMatchesStdExpAndZeroesWhatItMasks) {
  std::mt19937 rng(13);
  for (int n : {1, 7, 8, 9, 61, 4099}) {
    auto x = random_floats(rng, n, -30.f, 5.f);
    x[rng() % std::size_t(n)] = NAN;
    x[rng() % std::size_t(n)] = -INFINITY;
    x[rng() % std::size_t(n)] = INFINITY;
    const float shift = 5.f, scale = 1.f / 0.7f, floor = -20.f;
    std::vector<float> out(std::size_t(n), -1.f);
    masked_exp(x.data(), n, shift, scale, floor, out.data());
    for (int i = 0; i < n; ++i) {
      const float v = x[std::size_t(i)], got = out[std::size_t(i)];
      if (!std::isfinite(v) || v < floor) {
        EXPECT_EQ(got, 0.f) << "n " << n << " x " << v;
        continue;
      }
      const float expected = std::exp((v - shift) * scale);
      EXPECT_NEAR(got, expected, expected * 4e-7f + 1e-37f) << "n " << n << " x " << v;
    }
  }
}

}  // namespace
}  // namespace arbor::kernels::cpu

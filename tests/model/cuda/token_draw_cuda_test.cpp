// The device's draw (kernels/cuda/draw.hpp) against the rule it implements,
// model::draw_token, on the same logits and uniform numbers: rows of many sizes, ties,
// -inf and NaN logits, every mix of temperature, top-k and top-p. The device sums masses
// in fixed point and the host in double, so they could part only where a uniform number
// or a top-p target falls within ~1e-7 of a boundary: random draws do not.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cuda/draw.hpp"
#include "model/sampler.hpp"
#include "model/token_draw.hpp"
#include "tests/kernels/cuda/cuda_test_util.hpp"

namespace arbor::model {
namespace {

namespace cu = kernels::cuda;
using cu::testing::to_device;
using cu::testing::to_host;

TEST(CudaTokenDraw, SampledRowsPickWhatTheHostRulePicks) {
  ARBOR_REQUIRE_CUDA();
  SamplerRng rng(5);
  std::vector<float> scratch;
  int away_from_argmax = 0;
  for (int n : {1, 7, 300, 4099, 49152}) {
    const int rows = n > 10000 ? 4 : 24;
    std::vector<float> logits(std::size_t(rows) * std::size_t(n));
    for (auto& l : logits) l = float(std::round(rng.uniform() * 64.0 - 32.0) / 8.0);  // ties
    for (int k = 0; k < rows; ++k) {
      logits[rng.next() % logits.size()] = -INFINITY;
      if (k % 3 == 0) logits[rng.next() % logits.size()] = NAN;
    }
    std::vector<cu::RowDraw> draws(static_cast<std::size_t>(rows));
    for (int r = 0; r < rows; ++r) {
      cu::RowDraw& d = draws[std::size_t(r)];
      d.temperature = r % 8 == 7 ? 0.f : float(0.1 + 2.0 * rng.uniform());
      d.top_k = r % 3 == 0 ? 0 : int(rng.next() % std::uint64_t(n + 2));
      d.top_p = r % 4 == 0 ? 1.f : float(rng.uniform());
      d.uniform = float(rng.uniform());
    }
    const cu::DeviceBuffer d_logits = to_device(logits);
    const cu::DeviceBuffer d_draws = to_device(draws);
    const cu::DeviceBuffer d_out = to_device(std::vector<std::int32_t>(std::size_t(rows), -7));
    cu::draw_rows(d_logits.as<float>(), d_draws.as<const cu::RowDraw>(), rows, n, d_out.as<std::int32_t>(), nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto got = to_host<std::int32_t>(d_out, std::size_t(rows));
    for (int r = 0; r < rows; ++r) {
      const cu::RowDraw& d = draws[std::size_t(r)];
      const std::span<const float> row(logits.data() + std::size_t(r) * std::size_t(n), std::size_t(n));
      const TokenDraw host{d.temperature, d.top_k, d.top_p, double(d.uniform)};
      const std::int32_t expected = draw_token(row, host, scratch);
      EXPECT_EQ(got[std::size_t(r)], expected)
          << "n " << n << " row " << r << ": temperature " << d.temperature << " top_k " << d.top_k << " top_p "
          << d.top_p << " uniform " << d.uniform;
      away_from_argmax += expected != argmax(row);
    }
  }
  EXPECT_GT(away_from_argmax, 20) << "the draws never leave the argmax: the test would not see a wrong cut";
}

}  // namespace
}  // namespace arbor::model

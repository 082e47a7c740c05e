#include "model/perplexity.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cache/page_allocator.hpp"
#include "model/cpu_engine.hpp"
#include "tests/model/tiny_llama.hpp"

namespace arbor::model {
namespace {

TEST(Perplexity, ScoresSecondHalfOfEachChunkLikeLlamaCpp) {
  const auto bytes = testing::write_tiny_llama(testing::TinyLlamaShape{}, 5);
  auto file = GgufFile::parse(bytes);
  ASSERT_TRUE(file);
  auto config = read_llama_config(*file);
  ASSERT_TRUE(config);
  auto weights = bind_llama_weights(*file, *config);
  ASSERT_TRUE(weights);
  CpuEngine engine(*config, *weights, 1);
  cache::HostPageAllocator allocator;
  cache::PagePool pool(engine.kv_geometry(8), 16, allocator);

  std::mt19937 rng(9);
  std::vector<TokenId> tokens(50);
  for (auto& t : tokens) t = TokenId(rng() % std::uint32_t(config->vocab_size));
  const int ctx = 16;  // 3 full chunks; the last 2 tokens are not scored
  auto result = perplexity(engine, pool, tokens, ctx);
  ASSERT_TRUE(result) << result.error().message;

  double nll = 0;
  std::size_t scored = 0;
  for (std::size_t start = 0; start + ctx <= tokens.size(); start += ctx) {
    std::vector<TokenId> chunk(tokens.begin() + std::ptrdiff_t(start), tokens.begin() + std::ptrdiff_t(start + ctx));
    const auto logits = testing::naive_forward(*config, *weights, chunk);
    for (int j = ctx / 2; j + 1 < ctx; ++j, ++scored)
      nll += negative_log_likelihood(
          std::span<const float>(logits.data() + std::size_t(j) * std::size_t(config->vocab_size),
                                 std::size_t(config->vocab_size)),
          chunk[std::size_t(j) + 1]);
  }
  EXPECT_EQ(result->num_chunks, 3);
  EXPECT_EQ(result->num_scored, scored);
  EXPECT_NEAR(result->perplexity, std::exp(nll / double(scored)), 1e-2 * result->perplexity);
  EXPECT_GT(result->std_error, 0.0);
  EXPECT_EQ(pool.num_used(), 0);

  auto too_short = perplexity(engine, pool, std::span(tokens).first(10), ctx);
  ASSERT_FALSE(too_short);
  EXPECT_EQ(too_short.error().code, ErrorCode::invalid_argument);
}

TEST(Perplexity, NegativeLogLikelihoodIsStable) {
  const std::vector<float> logits = {1000.f, 1000.f, -1000.f};  // naive exp overflows
  EXPECT_NEAR(negative_log_likelihood(logits, 0), std::log(2.0), 1e-9);
}

}  // namespace
}  // namespace arbor::model

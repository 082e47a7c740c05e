#include "common/token_usage.hpp"

#include <gtest/gtest.h>

#include <type_traits>

#include <nlohmann/json.hpp>

#include "common/cache_stats.hpp"

namespace arbor {
namespace {

struct WithUsage : TokenUsage {
  int other = 7;
};

// Only TokenUsage itself converts: a struct deriving from it (GenerateResult, CacheStats'
// own macro aside) is not written as its counts alone by accident.
static_assert(std::is_constructible_v<nlohmann::json, const TokenUsage&>);
static_assert(std::is_constructible_v<nlohmann::ordered_json, const TokenUsage&>);
static_assert(!std::is_constructible_v<nlohmann::json, const WithUsage&>);

TEST(TokenUsage, AddsEveryCount) {
  TokenUsage sum{1, 2, 3, 4};
  WithUsage other;
  other.prompt_tokens = 10;
  other.cached_tokens = 20;
  other.computed_tokens = 30;
  other.generated_tokens = 40;
  sum += other.usage();
  EXPECT_EQ(sum.prompt_tokens, 11u);
  EXPECT_EQ(sum.cached_tokens, 22u);
  EXPECT_EQ(sum.computed_tokens, 33u);
  EXPECT_EQ(sum.generated_tokens, 44u);
  EXPECT_EQ(other.other, 7);
}

TEST(TokenUsage, HitRatioIsCachedOverPrompt) {
  EXPECT_EQ(hit_ratio(TokenUsage{}), 0.0);
  EXPECT_EQ(hit_ratio(TokenUsage{8, 2, 6, 0}), 0.25);
}

TEST(TokenUsage, JsonNamesAndOrder) {
  const TokenUsage u{5, 3, 2, 9};
  EXPECT_EQ(nlohmann::ordered_json(u).dump(),
            R"({"prompt_tokens":5,"cached_tokens":3,"computed_tokens":2,"generated_tokens":9})");
  nlohmann::json j = u;
  j["warmup_tokens"] = 1;
  EXPECT_EQ(j.dump(),
            R"({"cached_tokens":3,"computed_tokens":2,"generated_tokens":9,"prompt_tokens":5,"warmup_tokens":1})");
}

// Read back into the counts of a larger struct, from a document holding other keys too
// (the cluster wire's agent results); a missing count is an error, not a zero.
TEST(TokenUsage, JsonReadsBackIntoADerivedStruct) {
  nlohmann::json j = TokenUsage{5, 3, 2, 9};
  j["other"] = 1;
  WithUsage w;
  from_json(j, w.usage());
  EXPECT_EQ(w.prompt_tokens, 5u);
  EXPECT_EQ(w.cached_tokens, 3u);
  EXPECT_EQ(w.computed_tokens, 2u);
  EXPECT_EQ(w.generated_tokens, 9u);
  EXPECT_EQ(w.other, 7);
  j.erase("computed_tokens");
  EXPECT_THROW(from_json(j, w.usage()), nlohmann::json::out_of_range);
}

// CacheStats is a TokenUsage: its document still names the counts at its top level.
TEST(TokenUsage, CacheStatsCarriesItsCounts) {
  CacheStats s;
  s.usage() = TokenUsage{4, 1, 3, 2};
  s.warmup_tokens = 6;
  const nlohmann::json j = s;
  EXPECT_EQ(j["prompt_tokens"], 4);
  EXPECT_EQ(j["cached_tokens"], 1);
  EXPECT_EQ(j["computed_tokens"], 3);
  EXPECT_EQ(j["generated_tokens"], 2);
  EXPECT_EQ(j["warmup_tokens"], 6);
  CacheStats back = j.get<CacheStats>();
  EXPECT_EQ(back.prompt_tokens, 4u);
  EXPECT_EQ(back.generated_tokens, 2u);
}

}  // namespace
}  // namespace arbor

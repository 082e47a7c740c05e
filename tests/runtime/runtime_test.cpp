// End-to-end workflow runs on the real model (small max_tokens).
#include <gtest/gtest.h>

#include "runtime_test_util.hpp"

namespace arbor::testing {
namespace {

constexpr int kPage = 16;

TEST(RuntimeRun, ResearchTeamComputesSharedPrefixOnce) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  const auto wf = example_with_max_tokens("research_team", 8);
  const auto r = run_text(*rt, wf, {{"questions", R"(["Who built the first transistor?","Why replace vacuum tubes?","What is a MOSFET?","What does Moore's law say?"])"}});
  ASSERT_EQ(r.status, "ok") << to_json(r);
  ASSERT_EQ(r.agents.size(), 5u);
  const AgentResult* lead = agent(r, "lead");
  ASSERT_TRUE(lead);
  // The lead prefilled the shared prefix once (prefill-only warm-up) before its children.
  std::size_t prefix = 0, suffixes = 0, computed = 0;
  for (const auto& a : r.agents) {
    EXPECT_EQ(a.status, "ok") << a.id << ": " << a.error;
    computed += a.computed_tokens;
    if (a.id == "lead") continue;
    EXPECT_GT(a.generated_tokens, 0u) << a.id;
    EXPECT_FALSE(a.output.empty()) << a.id;
    prefix = std::max(prefix, a.cached_tokens);
  }
  ASSERT_GT(prefix, 500u);  // the transistor document is ~1000 tokens
  for (const auto& a : r.agents) {
    if (a.id == "lead") continue;
    EXPECT_GE(a.cached_tokens, prefix / kPage * kPage) << a.id;
    suffixes += a.prompt_tokens - a.cached_tokens;
  }
  const std::size_t P = prefix + kPage;  // the prefix segment, up to one partial page
  suffixes += lead->prompt_tokens - P;
  EXPECT_LE(computed, P + suffixes + kPage * r.agents.size()) << to_json(r);
  std::printf("research_team(4): wall %.0f ms, computed %zu tokens, lead %s\n", r.wall_ms, computed, to_json(r).c_str());
  std::printf("stats %s\n", to_json(rt->cache_stats()).c_str());
  expect_clean(*rt);
}

}  // namespace
}  // namespace arbor::testing

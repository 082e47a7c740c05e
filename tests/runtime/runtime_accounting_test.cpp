// Honest token accounting (issue 8, defect 11), on the real model: a parent's
// prefill-only warm-up of its shared prefix counts as warmup_tokens, never as prompt
// tokens, so per agent and in the totals prompt = cached + computed describes the
// agent's own turns, and prompt tokens are equal with and without the cache.
#include <gtest/gtest.h>

#include "runtime_test_util.hpp"

namespace arbor::testing {
namespace {

struct Measured {
  RunResult run;
  CacheStats stats;
  std::map<std::string, AgentResult> agents;
};

Measured measure(bool caching) {
  RuntimeConfig c = small_config();
  c.prefix_caching = caching;
  auto rt = make_runtime(c);
  if (!rt) return {};
  Measured m;
  m.run = run_text(*rt, team_workflow("accounting", long_system("rivers", 4), 3, 4));
  m.stats = rt->cache_stats();
  for (const auto& a : m.run.agents) m.agents[a.id] = a;
  expect_clean(*rt);
  return m;
}

TEST(RuntimeAccounting, WarmUpsAreCountedApartFromPrompts) {
  const Measured on = measure(true), off = measure(false);
  ASSERT_EQ(on.run.status, RunStatus::ok) << to_json(on.run);
  ASSERT_EQ(off.run.status, RunStatus::ok) << to_json(off.run);
  ASSERT_EQ(on.agents.size(), 4u);
  ASSERT_EQ(off.agents.size(), 4u);
  std::size_t sum_prompt = 0, sum_warmup = 0;
  for (const auto& [id, a] : on.agents) {
    const AgentResult& b = off.agents.at(id);
    EXPECT_EQ(a.prompt_tokens, a.cached_tokens + a.computed_tokens) << id;
    EXPECT_EQ(b.prompt_tokens, b.cached_tokens + b.computed_tokens) << id;
    EXPECT_EQ(a.prompt_tokens, b.prompt_tokens) << id << ": the cache must not change an agent's prompt tokens";
    EXPECT_EQ(b.warmup_tokens, 0u) << id;  // nothing is warmed without the cache
    EXPECT_EQ(a.output, b.output) << id;
    sum_prompt += a.prompt_tokens;
    sum_warmup += a.warmup_tokens;
  }
  // The boss (no task of its own) warmed the shared prefix for its workers.
  EXPECT_GT(on.agents.at("boss").warmup_tokens, 50u);
  EXPECT_EQ(sum_warmup, on.agents.at("boss").warmup_tokens);
  EXPECT_GT(on.agents.at("worker[0]").cached_tokens + on.agents.at("worker[1]").cached_tokens, 0u);

  // Cache statistics: the same split (this run is the runtime's only work).
  EXPECT_EQ(on.stats.prompt_tokens, off.stats.prompt_tokens);
  EXPECT_EQ(on.stats.prompt_tokens, sum_prompt);
  EXPECT_EQ(on.stats.cached_tokens + on.stats.computed_tokens, on.stats.prompt_tokens);
  EXPECT_EQ(off.stats.cached_tokens, 0u);
  EXPECT_EQ(on.stats.warmup_tokens, sum_warmup);
  EXPECT_EQ(off.stats.warmup_tokens, 0u);
  EXPECT_DOUBLE_EQ(on.stats.hit_ratio, double(on.stats.cached_tokens) / double(on.stats.prompt_tokens));

  // The documents: per agent and run totals.
  const auto j = nlohmann::json::parse(to_json(on.run));
  EXPECT_EQ(j["totals"]["prompt_tokens"], sum_prompt);
  EXPECT_EQ(j["totals"]["warmup_tokens"], sum_warmup);
  EXPECT_EQ(j["totals"]["cached_tokens"].get<std::size_t>() + j["totals"]["computed_tokens"].get<std::size_t>(),
            sum_prompt);
  for (const auto& a : j["agents"]) EXPECT_TRUE(a.contains("warmup_tokens")) << a.dump();
  EXPECT_EQ(nlohmann::json::parse(to_json(on.stats))["warmup_tokens"], sum_warmup);
}

}  // namespace
}  // namespace arbor::testing

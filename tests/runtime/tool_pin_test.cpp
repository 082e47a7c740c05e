// KV retention during tool calls (issue 11 section 3), end to end on the real model:
// while an agent's tool runs, other generations fill a small pool; with the tool pin
// (tool_pin_ttl_ms) the agent continues over its whole cached history (only the last
// partial page is prefilled again), without it LRU evicts the history and the agent
// recomputes it. Cancelling a run during a hung tool drops the pin. Cached and uncached
// runs with tools give the same outputs under greedy decoding.
#include <gtest/gtest.h>

#include <future>
#include <nlohmann/json.hpp>

#include "runtime/cli/pressure.hpp"
#include "runtime_test_util.hpp"

namespace arbor::testing {
namespace {

constexpr std::size_t kPageSize = 16;

std::string pin_workflow(const std::string& tool, int tool_timeout_ms = 600000) {
  nlohmann::json agent = {{"id", "solver"},
                          {"prefix", "p"},
                          {"task", "Look the answer up with the tool, then answer in one sentence."},
                          {"tools", {tool}},
                          {"tool_choice", "required"},
                          {"max_tool_calls", 1},
                          {"tool_timeout_ms", tool_timeout_ms},
                          {"generation", {{"max_tokens", 16}, {"temperature", 0}}}};
  nlohmann::json wf = {{"name", "tool-pin"},
                       {"prefixes", {{"p", {{"system", "You are a careful assistant. Use the tools you are given."}}}}},
                       {"agents", nlohmann::json::array({agent})}};
  return wf.dump();
}

const char* kArgs = R"({"type":"object","properties":{"q":{"type":"string","maxLength":8}}})";

RuntimeConfig pool_config(int tool_pin_ttl_ms) {
  RuntimeConfig c = small_config();
  c.kv_memory_mb = 16;  // ~45 pages of 16 tokens: a few generations fill it
  c.tool_pin_ttl_ms = tool_pin_ttl_ms;
  return c;
}

// The tool of the pressure test: other generations (distinct prompts, oldest first in
// LRU order after the agent's history) until the pool has evicted pages.
struct Pressure {
  Runtime* rt = nullptr;
  std::uint64_t evictions = 0;
  int generations = 0;
  Result<std::string> operator()(const nlohmann::ordered_json&) {
    const std::uint64_t before = rt->cache_stats().evictions;
    for (; generations < 20 && rt->cache_stats().evictions == before; ++generations)
      if (auto r = rt->generate(cli::pressure_request("other", generations)); !r) return std::unexpected(r.error());
    evictions = rt->cache_stats().evictions - before;
    return "42";
  }
};

TEST(ToolPin, HistorySurvivesMemoryPressureOnlyWhilePinned) {
  std::map<bool, std::size_t> recomputed;
  for (bool pinned : {true, false}) {
    auto rt = make_runtime(pool_config(pinned ? 600000 : 0));
    ASSERT_TRUE(rt);
    auto pressure = std::make_shared<Pressure>();
    pressure->rt = rt.get();
    ASSERT_TRUE(rt->add_tool({"lookup", "Looks an answer up.", kArgs,
                              [pressure](const nlohmann::ordered_json& a) { return (*pressure)(a); }}));
    auto r = run_text(*rt, pin_workflow("lookup"));
    ASSERT_EQ(r.status, RunStatus::ok) << r.error;
    const auto& a = r.agents.at(0);
    ASSERT_EQ(a.tool_trace.size(), 1u);
    ASSERT_EQ(a.tool_trace[0].status, ToolStatus::ok) << a.tool_trace[0].result;
    EXPECT_GT(pressure->evictions, 0u) << "the other generations did not fill the pool";
    recomputed[pinned] = a.tool_recomputed_tokens;
    expect_clean(*rt);
    EXPECT_EQ(rt->cache_stats().pins, 0);
  }
  EXPECT_LT(recomputed[true], kPageSize);  // the partial-page minimum
  EXPECT_GE(recomputed[false], kPageSize);  // at least one evicted page prefilled again
}

TEST(ToolPin, CancellingARunDuringAHungToolReleasesThePin) {
  auto rt = make_runtime(pool_config(600000));
  ASSERT_TRUE(rt);
  auto entered = std::make_shared<std::promise<void>>();
  auto release = std::make_shared<std::promise<void>>();
  auto released = release->get_future().share();
  ASSERT_TRUE(rt->add_tool({"stuck", "Never answers.", kArgs,
                            [entered, released](const nlohmann::ordered_json&) -> Result<std::string> {
                              entered->set_value();
                              released.wait();
                              return "late";
                            }}));
  auto h = rt->start(pin_workflow("stuck"), {.workflow_is_text = true});
  ASSERT_TRUE(h) << h.error().describe();
  entered->get_future().wait();
  const auto during = rt->cache_stats();
  EXPECT_EQ(during.pins, 1);
  EXPECT_GT(during.pages_pinned, 0);
  EXPECT_EQ(rt->check_invariants(), "");
  h->cancel();
  const auto r = h->wait();
  EXPECT_EQ(r.status, RunStatus::cancelled);
  const auto after = rt->cache_stats();
  EXPECT_EQ(after.pins, 0);
  EXPECT_EQ(after.pages_pinned, 0);
  EXPECT_EQ(after.pages_used, after.pages_cached_idle);  // no leaked page: all are plain cache
  expect_clean(*rt);
  release->set_value();
}

TEST(ToolPin, CachedEqualsUncachedWithToolsUnderGreedyDecoding) {
  std::map<bool, RunResult> runs;
  for (bool caching : {true, false}) {
    RuntimeConfig c = small_config();
    c.prefix_caching = caching;
    auto rt = make_runtime(c);
    ASSERT_TRUE(rt);
    ASSERT_TRUE(rt->add_tool({"lookup", "Looks an answer up.", kArgs,
                              [](const nlohmann::ordered_json& a) -> Result<std::string> {
                                return "the answer to " + a.dump() + " is 42";
                              }}));
    runs[caching] = run_text(*rt, pin_workflow("lookup"));
    ASSERT_EQ(runs[caching].status, RunStatus::ok) << runs[caching].error;
    expect_clean(*rt);
  }
  const auto &on = runs[true].agents.at(0), &off = runs[false].agents.at(0);
  EXPECT_GT(on.cached_tokens, 0u);
  EXPECT_EQ(off.cached_tokens, 0u);
  ASSERT_EQ(on.tool_trace.size(), off.tool_trace.size());
  for (std::size_t i = 0; i < on.tool_trace.size(); ++i) {
    EXPECT_EQ(on.tool_trace[i].arguments, off.tool_trace[i].arguments);
    EXPECT_EQ(on.tool_trace[i].result, off.tool_trace[i].result);
  }
  EXPECT_EQ(on.output, off.output);
  EXPECT_EQ(on.prompt_tokens, off.prompt_tokens);
}

}  // namespace
}  // namespace arbor::testing

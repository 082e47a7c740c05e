// Supervision and pressure: retries, failures naming the agent, timeouts, cancellation,
// a pool too small for every agent at once, requests that can never fit. Every case
// ends with no page locked and a clean cache.
#include <gtest/gtest.h>

#include <future>

#include "fault_injection.hpp"
#include "runtime_test_util.hpp"

namespace arbor::testing {
namespace {

const std::map<std::string, std::string> kThree = {{"topics", R"(["rivers","mountains","deserts"])"}};

std::unique_ptr<Runtime> runtime_with_faults(std::map<std::string, int> fail, std::map<std::string, int> hang = {}) {
  auto rt = make_runtime();
  if (rt) RuntimeTestAccess::inject_faults(*rt, std::move(fail), std::move(hang));
  return rt;
}

TEST(Supervision, InjectedFailureIsRetriedAndTheRunSucceeds) {
  auto rt = runtime_with_faults({{"worker[1]", 1}});
  ASSERT_TRUE(rt);
  const auto r = run_text(*rt, team_workflow("retry", long_system("rivers", 3), 3, 4, R"({"max_retries": 1})"));
  ASSERT_EQ(r.status, RunStatus::ok) << to_json(r);
  EXPECT_EQ(agent(r, "worker[1]")->attempts, 2);
  EXPECT_EQ(agent(r, "worker[0]")->attempts, 1);
  EXPECT_FALSE(agent(r, "worker[1]")->output.empty());
  expect_clean(*rt);
}

TEST(Supervision, PastMaxRetriesTheRunFailsNamingTheAgent) {
  auto rt = runtime_with_faults({{"worker[2]", 5}});
  ASSERT_TRUE(rt);
  const auto r = run_text(*rt, team_workflow("fail", long_system("rivers", 3), 3, 4, R"({"max_retries": 2})"));
  EXPECT_EQ(r.status, RunStatus::failed);
  const AgentResult* w = agent(r, "worker[2]");
  EXPECT_EQ(w->status, AgentStatus::failed);
  EXPECT_EQ(w->attempts, 3);
  EXPECT_NE(w->error.find("agent 'worker[2]' failed after 3 attempts: injected fault"), std::string::npos) << w->error;
  EXPECT_EQ(agent(r, "boss")->status, AgentStatus::failed);
  EXPECT_NE(r.error.find("worker[2]"), std::string::npos) << r.error;
  expect_clean(*rt);
}

TEST(Supervision, TimeoutFailsCleanly) {
  auto rt = runtime_with_faults({}, {{"worker[0]", 9}});
  ASSERT_TRUE(rt);
  // Only the workers have the short timeout; the boss's covers its children's retries.
  auto wf = nlohmann::json::parse(team_workflow("timeout", long_system("rivers", 3), 1, 4, R"({"max_retries": 1})"));
  wf["agents"][0]["timeout_ms"] = 60000;
  wf["agents"][0]["agents"][0]["timeout_ms"] = 150;
  const auto r = run_text(*rt, wf.dump());
  EXPECT_EQ(r.status, RunStatus::failed);
  const AgentResult* w = agent(r, "worker[0]");
  EXPECT_EQ(w->status, AgentStatus::timeout);
  EXPECT_EQ(w->attempts, 2);
  EXPECT_NE(w->error.find("timed out after 150 ms"), std::string::npos) << w->error;
  EXPECT_NE(r.error.find("worker[0]"), std::string::npos) << r.error;
  expect_clean(*rt);
}

TEST(Supervision, TimeoutOfARealGenerationFailsCleanly) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  // 1 ms cannot cover a prefill of hundreds of tokens: the attempt is cut mid-flight.
  const auto r = run_text(*rt, team_workflow("timeout", long_system("rivers", 20), 2, 24,
                                             R"({"max_retries": 0, "timeout_ms": 1})"));
  EXPECT_EQ(r.status, RunStatus::failed);
  EXPECT_NE(r.error.find("timed out"), std::string::npos) << r.error;
  expect_clean(*rt);
}

TEST(Supervision, CancellationStopsGeneration) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  const auto r = cancel_at_first_token(*rt, team_workflow("cancel", long_system("rivers", 3), 3, 400), kThree);
  EXPECT_EQ(r.status, RunStatus::cancelled);
  std::size_t generated = 0;
  for (const auto& a : r.agents) {
    EXPECT_NE(a.status, AgentStatus::ok) << a.id;
    generated += a.generated_tokens;
  }
  EXPECT_LT(generated, 400u);
  expect_clean(*rt);
  // The runtime still serves new work after a cancel.
  const auto again = run_text(*rt, team_workflow("after", long_system("rivers", 3), 1, 4));
  EXPECT_EQ(again.status, RunStatus::ok) << to_json(again);
  expect_clean(*rt);
}

// Pool of 14 pages (224 tokens): a worker needs 8 pages, the boss's fan-in 12, so
// agents run one or two at a time; the rest queue and the cache evicts idle pages.
TEST(Supervision, PoolTooSmallForAllAgentsStillCompletesEveryAgent) {
  for (bool caching : {false, true}) {
    SCOPED_TRACE(caching ? "caching on" : "caching off");
    auto config = small_config();
    config.kv_memory_mb = 5;
    config.prefix_caching = caching;
    auto rt = make_runtime(config);
    ASSERT_TRUE(rt);
    for (const char* theme : {"rivers", "mountains"}) {
      const auto r = run_text(*rt, team_workflow(theme, long_system(theme, 6), 4, 8));
      ASSERT_EQ(r.status, RunStatus::ok) << to_json(r);
      for (const auto& a : r.agents) EXPECT_EQ(a.status, AgentStatus::ok) << a.id << ": " << a.error;
      expect_clean(*rt);
    }
    if (caching) {
      EXPECT_GT(rt->cache_stats().evictions, 0u);
    }
  }
}

TEST(Supervision, RequestsThatCanNeverFitFailClearly) {
  auto config = small_config();
  config.kv_memory_mb = 4;  // 11 pages
  auto rt = make_runtime(config);
  ASSERT_TRUE(rt);
  GenerateRequest big;
  big.messages = {{"system", long_system("rivers", 30)}, {"user", "Hello"}};
  big.sampling.max_tokens = 8;
  auto r = rt->generate(big);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::out_of_memory);
  EXPECT_NE(r.error().message.find("whole pool has 11"), std::string::npos) << r.error().message;

  GenerateRequest tall;
  tall.messages = {{"user", "Hello"}};
  tall.sampling.max_tokens = int(rt->context_length()) + 1;
  r = rt->generate(tall);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::too_long);
  EXPECT_NE(r.error().message.find("exceeds the model context"), std::string::npos) << r.error().message;

  // Inside a workflow: the agent fails with the reason, the run fails.
  const auto run = run_text(*rt, team_workflow("huge", long_system("rivers", 30), 1, 8, R"({"max_retries": 0})"));
  EXPECT_EQ(run.status, RunStatus::failed);
  EXPECT_NE(run.error.find("whole pool"), std::string::npos) << run.error;
  expect_clean(*rt);
}

// A cache actor that cannot answer: cache_stats() returns empty stats, as before, but
// the failure is no longer swallowed (logged at error level and counted).
TEST(Supervision, CacheStatsFromADeadCacheActorIsCountedNotSwallowed) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  EXPECT_GT(rt->cache_stats().pages_total, 0);
  EXPECT_EQ(RuntimeTestAccess::cache_stats_failures(*rt), 0u);
  RuntimeTestAccess::kill_cache_actor(*rt);
  ::testing::internal::CaptureStderr();
  const CacheStats stats = rt->cache_stats();
  const std::string logged = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(stats.pages_total, 0);
  EXPECT_EQ(RuntimeTestAccess::cache_stats_failures(*rt), 1u);
  EXPECT_NE(logged.find("[error] cache_stats: the cache actor did not answer"), std::string::npos) << logged;
}

TEST(Supervision, TenantQuotaBoundsARequest) {
  auto config = small_config();
  config.tenants["small"] = TenantOptions{4, false};
  auto rt = make_runtime(config);
  ASSERT_TRUE(rt);
  GenerateRequest req;
  req.tenant = "small";
  req.messages = {{"system", long_system("rivers", 6)}, {"user", "Hello"}};
  req.sampling.max_tokens = 8;
  auto r = rt->generate(req);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("quota of 4 pages"), std::string::npos) << r.error().message;
  req.tenant = "big";
  EXPECT_TRUE(rt->generate(req));
  expect_clean(*rt);
}

}  // namespace
}  // namespace arbor::testing

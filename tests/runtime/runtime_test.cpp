// End-to-end workflow runs on the real model (small max_tokens). Every case ends with
// expect_clean: no page locked, no live or queued sequence, cache invariants clean.
#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "runtime_test_util.hpp"

namespace arbor::testing {
namespace {

constexpr std::size_t kPage = 16;
const std::map<std::string, std::string> kFourQuestions = {
    {"questions", R"(["Who built the first transistor?","Why replace vacuum tubes?","What is a MOSFET?","What does Moore's law say?"])"}};

class RuntimeRun : public CleanRuntimeTest {};

TEST_F(RuntimeRun, ResearchTeamComputesSharedPrefixOnce) {
  const auto r = run_text(*rt_, example_with_max_tokens("research_team", 8), kFourQuestions);
  ASSERT_EQ(r.status, RunStatus::ok) << to_json(r);
  ASSERT_EQ(r.agents.size(), 5u);
  const AgentResult* lead = agent(r, "lead");
  ASSERT_TRUE(lead);
  std::size_t prefix = 0, computed = 0;
  for (const auto& a : r.agents) {
    EXPECT_EQ(a.status, AgentStatus::ok) << a.id << ": " << a.error;
    computed += a.computed_tokens;
    if (a.id != "lead") prefix = std::max(prefix, a.cached_tokens);
  }
  ASSERT_GT(prefix, 500u);  // the transistor document is ~1000 tokens
  std::size_t suffixes = 0;
  for (const auto& a : r.agents) {
    if (a.id == "lead") continue;
    EXPECT_GT(a.generated_tokens, 0u) << a.id;
    EXPECT_GE(a.cached_tokens, prefix / kPage * kPage) << a.id;
    suffixes += a.prompt_tokens - a.cached_tokens;
  }
  // The lead prefilled the prefix once (P tokens, at most one page beyond `prefix`),
  // then its fan-in turn's suffix; each researcher only its own suffix.
  const std::size_t P = prefix + kPage;
  EXPECT_LE(computed, P + suffixes + (lead->prompt_tokens - lead->cached_tokens - P) + kPage * r.agents.size())
      << to_json(r);
  EXPECT_LT(computed, 2 * P);  // computing the prefix twice would break this
  std::printf("research_team(4 researchers, 8 tokens): wall %.0f ms, computed %zu of %zu prompt tokens\n", r.wall_ms,
              computed, [&] { std::size_t n = 0; for (auto& a : r.agents) n += a.prompt_tokens; return n; }());
}

TEST_F(RuntimeRun, OutputsWithCachingEqualOutputsWithout) {
  const auto wf = example_with_max_tokens("research_team", 8);
  const auto on = run_text(*rt_, wf, kFourQuestions);
  ASSERT_EQ(on.status, RunStatus::ok) << to_json(on);
  auto config = small_config();
  config.prefix_caching = false;
  auto off_rt = make_runtime(config);
  ASSERT_TRUE(off_rt);
  const auto off = run_text(*off_rt, wf, kFourQuestions);
  ASSERT_EQ(off.status, RunStatus::ok) << to_json(off);
  ASSERT_EQ(on.agents.size(), off.agents.size());
  std::size_t computed_on = 0, computed_off = 0;
  for (std::size_t i = 0; i < on.agents.size(); ++i) {
    EXPECT_EQ(on.agents[i].id, off.agents[i].id);
    EXPECT_EQ(on.agents[i].output, off.agents[i].output) << on.agents[i].id;
    EXPECT_EQ(off.agents[i].cached_tokens, 0u);
    computed_on += on.agents[i].computed_tokens;
    computed_off += off.agents[i].computed_tokens;
  }
  std::printf("cache on: %zu computed tokens, %.0f ms; cache off: %zu computed tokens, %.0f ms\n", computed_on,
              on.wall_ms, computed_off, off.wall_ms);
  EXPECT_LT(computed_on * 2, computed_off);
  expect_clean(*off_rt);
}

TEST_F(RuntimeRun, NestedTeamsComplete) {
  const auto r = run_text(*rt_, example_with_max_tokens("nested_teams", 6));
  ASSERT_EQ(r.status, RunStatus::ok) << to_json(r);
  EXPECT_EQ(r.agents.size(), 13u);
  const AgentResult* director = agent(r, "director");
  ASSERT_TRUE(director);
  for (const auto& a : r.agents) {
    EXPECT_EQ(a.status, AgentStatus::ok) << a.id;
    EXPECT_FALSE(a.output.empty()) << a.id;
    if (a.parent.empty()) continue;
    EXPECT_GT(a.cached_tokens, 500u) << a.id;  // every descendant reads the director's prefix
  }
}

TEST_F(RuntimeRun, LaterTurnsReuseTheirHistory) {
  const auto r = run_text(*rt_, example_with_max_tokens("refine_loop", 8));
  ASSERT_EQ(r.status, RunStatus::ok) << to_json(r);
  const AgentResult* writer = agent(r, "writer");
  const AgentResult* editor = agent(r, "editor");
  ASSERT_TRUE(writer && editor);
  // Three turns over a ~1000-token history: turns 2 and 3 match turn 1's prompt and
  // reply from the cache, so the writer computes little more than one prompt.
  EXPECT_GT(writer->prompt_tokens, 3000u);
  EXPECT_GT(writer->cached_tokens, 2000u);
  EXPECT_LT(writer->computed_tokens, writer->prompt_tokens / 2);
  EXPECT_GT(editor->cached_tokens, 500u);  // same prefix, later agent
}

TEST_F(RuntimeRun, TenantsShareWithinAndNeverAcross) {
  const auto a = run_text(*rt_, example_with_max_tokens("tenant_a", 6));
  ASSERT_EQ(a.status, RunStatus::ok) << to_json(a);
  EXPECT_EQ(agent(a, "triage")->cached_tokens, 0u);
  EXPECT_GT(agent(a, "reply")->cached_tokens, 200u);  // same prefix, same tenant: hit
  const auto b = run_text(*rt_, example_with_max_tokens("tenant_b", 6));
  ASSERT_EQ(b.status, RunStatus::ok) << to_json(b);
  EXPECT_EQ(b.tenant, "tenant-b");
  EXPECT_EQ(agent(b, "triage")->cached_tokens, 0u);  // byte-identical prefix, other tenant: miss
  EXPECT_GT(agent(b, "reply")->cached_tokens, 200u);
  const auto c = run_text(*rt_, example_with_max_tokens("tenant_a", 6), {}, std::string("tenant-c"));
  ASSERT_EQ(c.status, RunStatus::ok);
  EXPECT_EQ(c.tenant, "tenant-c");
  EXPECT_EQ(agent(c, "triage")->cached_tokens, 0u);  // the override is a namespace of its own
  const auto again = run_text(*rt_, example_with_max_tokens("tenant_a", 6));
  EXPECT_GT(agent(again, "triage")->cached_tokens, 200u);  // tenant-a's own pages are still cached
}

TEST_F(RuntimeRun, InvalidWorkflowIsAnErrorWithDiagnostics) {
  auto h = rt_->start(R"({"name": "x", "agents": [{"id": "a", "task": "{{inputs.nope}}"}]})", {.workflow_is_text = true});
  ASSERT_FALSE(h);
  EXPECT_EQ(h.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(h.error().message.find("nope"), std::string::npos) << h.error().message;
  auto missing = rt_->run("/nonexistent/workflow.json");
  EXPECT_FALSE(missing);
}

TEST_F(RuntimeRun, EventsArriveInOrderWithCacheSnapshots) {
  std::mutex mu;
  std::vector<Event> events;
  auto h = rt_->start(team_workflow("events", long_system("rivers", 4), 2, 4), {.on_event =
                                                                             [&](const Event& e) {
                                                                               std::lock_guard lock(mu);
                                                                               events.push_back(e);
                                                                             },
                                                                         .workflow_is_text = true});
  ASSERT_TRUE(h);
  const auto r = h->wait();
  ASSERT_EQ(r.status, RunStatus::ok) << to_json(r);
  std::lock_guard lock(mu);
  ASSERT_GE(events.size(), 8u);
  EXPECT_EQ(events.front().kind, Event::Kind::run_started);
  EXPECT_EQ(events.back().kind, Event::Kind::run_finished);
  EXPECT_EQ(events.back().status, EventStatus(RunStatus::ok));
  EXPECT_EQ(events.back().cache.pages_locked, 0);
  std::map<std::string, std::string> streamed;
  int finished = 0;
  for (const auto& e : events) {
    EXPECT_EQ(e.run_id, r.run_id);
    if (e.kind == Event::Kind::token) streamed[e.agent_id] += e.text;
    if (e.kind == Event::Kind::agent_finished) {
      ++finished;
      EXPECT_GT(e.cache.pages_total, 0);
      EXPECT_EQ(e.text, agent(r, e.agent_id)->output);
      EXPECT_EQ(streamed[e.agent_id], e.text) << e.agent_id;  // the streamed pieces make the output
    }
  }
  EXPECT_EQ(finished, 3);
}

TEST(RuntimeJson, DocumentsHaveTheDocumentedFields) {
  RunResult r;
  r.run_id = "run-1";
  r.workflow = "w";
  r.tenant = "t";
  r.status = RunStatus::failed;
  r.agents.push_back(AgentResult{{1, 2, 3, 4}, "a", "", AgentStatus::failed, "", 1, 5.0, 6.0, "boom"});
  r.agents.push_back(AgentResult{{1, 0, 1, 2}, "b", "a", AgentStatus::ok, "out", 1, 1.0, 2.0, ""});
  const auto j = nlohmann::json::parse(to_json(r));
  std::set<std::string> keys;
  for (auto& [k, v] : j.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"run_id", "workflow", "tenant", "status", "agents", "wall_ms", "totals"}));
  EXPECT_EQ(j["totals"]["prompt_tokens"], 2);
  EXPECT_EQ(j["totals"]["warmup_tokens"], 0);
  std::set<std::string> agent_keys;
  for (auto& [k, v] : j["agents"][0].items()) agent_keys.insert(k);
  EXPECT_EQ(agent_keys, (std::set<std::string>{"id", "parent", "status", "output", "prompt_tokens", "cached_tokens",
                                               "computed_tokens", "generated_tokens", "warmup_tokens", "ttft_ms",
                                               "duration_ms", "error"}));
  EXPECT_FALSE(j["agents"][1].contains("error"));
  EXPECT_EQ(j["agents"][0]["generated_tokens"], 4);
  CacheStats s;
  s.prompt_tokens = 10;
  s.cached_tokens = 4;
  s.hit_ratio = 0.4;
  s.tenants["t"].hit_tokens = 4;
  const auto c = nlohmann::json::parse(to_json(s));
  for (const char* k : {"prompt_tokens", "cached_tokens", "computed_tokens", "warmup_tokens", "hit_ratio",
                        "pages_total", "pages_used", "pages_locked", "evictions", "tenants"})
    EXPECT_TRUE(c.contains(k)) << k;
  EXPECT_EQ(c["tenants"]["t"]["hit_tokens"], 4);
  const auto g = nlohmann::json::parse(to_json(GenerateResult{{3, 0, 3, 2}, "hi", {1, 2}, 1, 1, 1, FinishReason::stop}));
  EXPECT_EQ(g["finish_reason"], "stop");
  EXPECT_EQ(g["tokens"].size(), 2u);
}

// The cache document is generated from common/cache_stats.hpp; its bytes are what the
// hand-written document gave (the CLI's --json and the server's /v1/cache/stats read it).
// The tool events as the runs SSE stream and `arbor run --json` write them.
TEST(RuntimeJson, ToolEventsHaveTheDocumentedFields) {
  Event call;
  call.kind = Event::Kind::tool_call;
  call.run_id = "run-1";
  call.agent_id = "solver";
  call.tool = "calculator";
  call.text = R"({"expression":"2+2"})";
  EXPECT_EQ(event_json(call).dump(),
            R"({"type":"tool_call","run_id":"run-1","agent_id":"solver","tool":"calculator",)"
            R"("arguments":{"expression":"2+2"}})");
  Event result = call;
  result.kind = Event::Kind::tool_result;
  result.text.clear();
  result.status = ToolStatus::timeout;
  result.tool_ms = 1.5;
  result.tool_bytes = 12;
  EXPECT_EQ(event_json(result).dump(),
            R"({"type":"tool_result","run_id":"run-1","agent_id":"solver","tool":"calculator","status":"timeout",)"
            R"("ms":1.5,"bytes":12})");
  EXPECT_STREQ(to_string(Event::Kind::tool_call), "tool_call");
  EXPECT_STREQ(to_string(Event::Kind::tool_result), "tool_result");
}

TEST(RuntimeJson, CacheStatsDocumentKeepsItsBytes) {
  CacheStats s;
  s.prompt_tokens = 10;
  s.cached_tokens = 4;
  s.computed_tokens = 6;
  s.generated_tokens = 3;
  s.warmup_tokens = 11;
  s.hit_ratio = 0.4;
  s.pages_total = 16;
  s.pages_used = 9;
  s.pages_free = 7;
  s.pages_locked = 8;
  s.pages_cached_idle = 5;
  s.pages_pinned = 3;
  s.pins = 1;
  s.evictions = 2;
  s.live_sequences = 1;
  s.queued_requests = 2;
  s.batched_steps = 12;
  s.step_seconds = 0.5;
  s.forward_seconds = 0.25;
  s.graph_steps_replayed = 9;
  s.graph_steps_captured = 2;
  TenantCacheStats& t = s.tenants["t"];
  t.lookups = 2;
  t.hit_tokens = 4;
  t.miss_tokens = 6;
  t.inserted_tokens = 3;
  t.evicted_pages = 1;
  t.used_pages = 5;
  t.quota_pages = 8;
  t.num_sequences = 1;
  EXPECT_EQ(to_json(s),
            R"({"batched_steps":12,"cached_tokens":4,"computed_tokens":6,"evictions":2,"forward_seconds":0.25,)"
            R"("generated_tokens":3,"graph_steps_captured":2,"graph_steps_replayed":9,"hit_ratio":0.4,)"
            R"("live_sequences":1,"pages_cached_idle":5,"pages_free":7,"pages_locked":8,"pages_pinned":3,)"
            R"("pages_total":16,"pages_used":9,"pins":1,"prompt_tokens":10,"queued_requests":2,"step_seconds":0.5,)"
            R"("tenants":{"t":{"evicted_pages":1,)"
            R"("hit_tokens":4,"inserted_tokens":3,"lookups":2,"miss_tokens":6,"num_sequences":1,"quota_pages":8,)"
            R"("used_pages":5}},"warmup_tokens":11})");
  EXPECT_EQ(to_json(CacheStats{}),
            R"({"batched_steps":0,"cached_tokens":0,"computed_tokens":0,"evictions":0,"forward_seconds":0.0,)"
            R"("generated_tokens":0,"graph_steps_captured":0,"graph_steps_replayed":0,"hit_ratio":0.0,)"
            R"("live_sequences":0,"pages_cached_idle":0,"pages_free":0,"pages_locked":0,"pages_pinned":0,)"
            R"("pages_total":0,"pages_used":0,"pins":0,"prompt_tokens":0,"queued_requests":0,"step_seconds":0.0,)"
            R"("tenants":{},"warmup_tokens":0})");
}

}  // namespace
}  // namespace arbor::testing

// runtime/cluster/wire, workflow runs: a run request, each kind of run event and a
// run's outcome cross the wire as JSON and come back field for field (the router
// writes its run documents from what comes back: to_json of the result must not change).
#include <gtest/gtest.h>

#include "runtime/cluster/wire.hpp"

namespace arbor::cluster {
namespace {

TEST(ClusterWireRuns, ARunRequestComesBackWithItsDocuments) {
  const RunRequest r{R"({"name":"w"})", {{"topic", "rust"}}, "alice", {{"docs/a.md", "bytes\n\x01 of a"}}};
  auto back = run_request_from_wire(to_wire(r));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->workflow, r.workflow);
  EXPECT_EQ(back->inputs, r.inputs);
  EXPECT_EQ(back->tenant, "alice");
  EXPECT_EQ(back->documents, r.documents);
  EXPECT_EQ(run_request_from_wire("[1]").error().code, ErrorCode::corrupt_data);
}

TEST(ClusterWireRuns, EveryEventComesBackWithItsStatus) {
  const std::vector<std::pair<Event::Kind, EventStatus>> cases = {{Event::Kind::run_started, RunStatus::running},
                                                                  {Event::Kind::agent_started, AgentStatus::running},
                                                                  {Event::Kind::token, {}},
                                                                  {Event::Kind::agent_finished, AgentStatus::timeout},
                                                                  {Event::Kind::run_finished, RunStatus::failed},
                                                                  {Event::Kind::tool_call, {}},
                                                                  {Event::Kind::tool_result, ToolStatus::error}};
  for (const auto& [kind, status] : cases) {
    Event e;
    e.kind = kind;
    e.run_id = "run-3";
    e.agent_id = "lead";
    e.text = "out";
    e.status = status;
    e.cache.prompt_tokens = 40;
    e.cache.tenants["alice"].hit_tokens = 16;
    e.tool = "calculator";
    e.tool_ms = 1.5;
    e.tool_bytes = 7;
    auto back = event_from_wire(event_to_wire(e));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(event_json(*back), event_json(e)) << to_string(kind);
    EXPECT_EQ(back->status, e.status) << to_string(kind);
    EXPECT_EQ(back->cache.prompt_tokens, 40u);
    EXPECT_EQ(back->cache.tenants.at("alice").hit_tokens, 16u);
  }
}

TEST(ClusterWireRuns, AnOutcomeComesBackAsTheSameRunDocument) {
  RunOutcome o;
  o.result.run_id = "run-1";
  o.result.workflow = "team";
  o.result.tenant = "bob";
  o.result.status = RunStatus::failed;
  o.result.error = "agent lead failed";
  o.result.wall_ms = 12.5;
  AgentResult a;
  a.id = "lead";
  a.status = AgentStatus::failed;
  a.output = "partial";
  a.prompt_tokens = 30;
  a.cached_tokens = 16;
  a.computed_tokens = 14;
  a.generated_tokens = 3;
  a.attempts = 2;
  a.error = "timeout";
  a.json = nlohmann::ordered_json::parse(R"({"z":1,"a":[true]})");
  a.tool_calls = 1;
  a.tool_trace = {{"calculator", R"({"expression":"1+1"})", ToolStatus::ok, "2", 0.25}};
  AgentResult worker;
  worker.id = "lead/worker[0]";
  worker.parent = "lead";
  o.result.agents = {a, worker};
  o.finished.kind = Event::Kind::run_finished;
  o.finished.status = RunStatus::failed;
  auto back = run_outcome_from_wire(to_wire(Result<RunOutcome>(o)));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(to_json(back->result), to_json(o.result));
  EXPECT_EQ(back->result.agents[0].attempts, 2);
  EXPECT_EQ(back->finished.status, EventStatus{RunStatus::failed});

  auto error = run_outcome_from_wire(to_wire(Result<RunOutcome>(fail(ErrorCode::invalid_argument, "bad"))));
  ASSERT_FALSE(error);
  EXPECT_EQ(error.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(error.error().message, "bad");
}

}  // namespace
}  // namespace arbor::cluster

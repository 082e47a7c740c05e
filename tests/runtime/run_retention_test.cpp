// What a server keeps of finished workflow runs, and that nothing else of a run stays
// behind: retention bounded by count and bytes, summaries instead of event logs and run
// handles, run handles freed even when their callback owns them, the cache actor's
// per-run bookkeeping bounded.
#include <gtest/gtest.h>

#include "runtime/server/run_registry.hpp"
#include "runtime/server/server.hpp"
#include "runtime_test_util.hpp"
#include "server_test_util.hpp"

namespace arbor::server::test {
namespace {

Event event(Event::Kind kind, const std::string& agent = "", const std::string& text = "") {
  Event e;
  e.kind = kind;
  e.run_id = "r";
  e.agent_id = agent;
  e.text = text;
  if (kind == Event::Kind::agent_finished) e.status = AgentStatus::ok;
  if (kind == Event::Kind::run_finished) e.status = RunStatus::ok;
  return e;
}

// A run of `tokens` token events of `piece`, finished and retired with `document`.
std::shared_ptr<RunEntry> finished_run(int tokens, const std::string& piece, const std::string& document) {
  auto entry = std::make_shared<RunEntry>("t");
  entry->publish(event(Event::Kind::run_started));
  entry->publish(event(Event::Kind::agent_started, "a"));
  for (int i = 0; i < tokens; ++i) entry->publish(event(Event::Kind::token, "a", piece));
  entry->publish(event(Event::Kind::agent_finished, "a", "the output"));
  entry->publish(event(Event::Kind::run_finished));
  entry->retire(document, RunStatus::ok);
  return entry;
}

TEST(ServerRetention, AFinishedRunKeepsItsLifecycleNotItsTokens) {
  auto live = std::make_shared<RunEntry>("t");
  live->publish(event(Event::Kind::run_started));
  for (int i = 0; i < 1000; ++i) live->publish(event(Event::Kind::token, "a", std::string(100, 'x')));
  EXPECT_GT(live->retained_bytes(), 100'000u);  // a follower joining mid-run gets every token

  auto done = finished_run(1000, std::string(100, 'x'), "{\"status\":\"ok\"}");
  EXPECT_LT(done->retained_bytes(), 2'000u);
  EXPECT_EQ(done->document(), "{\"status\":\"ok\"}");
  EXPECT_EQ(done->retired_status(), RunStatus::ok);
  EXPECT_EQ(done->control(), nullptr);
}

TEST(ServerRetention, FinishedRunsAreBoundedByCountAndBytes) {
  const std::size_t max_bytes = 64 << 10;
  RunRegistry registry(/*max_finished=*/8, max_bytes);
  auto running = std::make_shared<RunEntry>("t");
  running->publish(event(Event::Kind::run_started));
  registry.add("running", running);
  const std::string big(20 << 10, 'd');  // 20 KiB documents: three fit in the byte budget
  const std::size_t each = finished_run(10, "tok", big)->retained_bytes();
  const std::size_t fit = max_bytes / each;
  ASSERT_EQ(fit, 3u);
  for (int i = 0; i < 50; ++i) {
    registry.add("run-" + std::to_string(i), finished_run(10, "tok", big));
    registry.trim();
    ASSERT_LE(registry.finished_bytes(), max_bytes);
    ASSERT_LE(registry.num_finished(), 8u);
  }
  EXPECT_EQ(registry.num_finished(), fit);
  EXPECT_NE(registry.find("run-49"), nullptr);  // the newest stay
  EXPECT_NE(registry.find("run-47"), nullptr);
  EXPECT_EQ(registry.find("run-46"), nullptr);
  EXPECT_NE(registry.find("running"), nullptr);  // a running run is never dropped

  for (int i = 0; i < 50; ++i) registry.add("small-" + std::to_string(i), finished_run(1, "t", "{}"));
  EXPECT_EQ(registry.num_finished(), 8u);  // now the count binds
  // One run larger than the whole budget is still kept while it is the newest.
  registry.add("huge", finished_run(1, "t", std::string(max_bytes * 2, 'h')));
  registry.trim();
  EXPECT_EQ(registry.num_finished(), 1u);
  EXPECT_NE(registry.find("huge"), nullptr);
}

TEST(ServerRetention, RetiredRunsLetGoOfTheirRunHandles) {
  FakeBackend backend;
  auto config = parse_server_config(R"({"port":0,"limits":{"max_runs":4}})");
  ASSERT_TRUE(config.has_value()) << config.error().message;
  auto server = Server::start(*config, backend);
  ASSERT_TRUE(server.has_value()) << server.error().message;
  const int port = (*server)->port();
  std::vector<std::string> ids;
  for (int i = 0; i < 20; ++i) {
    auto started = request(port, "POST", "/v1/runs", R"({"workflow":{"agents":[]}})");
    ASSERT_EQ(started.status, 202) << started.body;
    ids.push_back(started.json()["id"]);
    ASSERT_TRUE(eventually([&] { return request(port, "GET", "/v1/runs/" + ids.back()).json()["status"] == "ok"; }));
  }
  ASSERT_TRUE(eventually([&] { return (*server)->api().inflight() == 0; }));
  EXPECT_EQ((*server)->api().runs().num_finished(), 4u);
  EXPECT_EQ((*server)->api().runs().size(), 4u);
  EXPECT_EQ(request(port, "GET", "/v1/runs/" + ids.front()).status, 404);  // dropped
  // Every settled run answers from its summary; no RunControl (plan, results) is held.
  EXPECT_TRUE(eventually([&] { return backend.num_run_controls == 0; }));
  auto doc = request(port, "GET", "/v1/runs/" + ids.back());
  EXPECT_EQ(doc.status, 200);
  EXPECT_EQ(doc.json()["status"], "ok");
  EXPECT_EQ(request(port, "GET", "/v1/runs").json()["data"].back()["status"], "ok");
  EXPECT_EQ(request(port, "DELETE", "/v1/runs/" + ids.back()).status, 200);  // nothing left to cancel
  auto events = sse_payloads(request(port, "GET", "/v1/runs/" + ids.back() + "/events").body);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(nlohmann::json::parse(events[2])["type"], "agent_finished");
  EXPECT_EQ(nlohmann::json::parse(events[2])["text"], "hello");
}

TEST(ServerRetention, ConfigBoundsRetainedBytes) {
  auto c = parse_server_config(R"({"limits":{"max_run_bytes":1048576}})");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->max_run_bytes, 1048576u);
  EXPECT_EQ(ServerConfig{}.max_run_bytes, std::size_t(64) << 20);
  auto bad = parse_server_config(R"({"limits":{"max_run_bytes":10}})");
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.error().message.find("/limits/max_run_bytes"), std::string::npos) << bad.error().message;
}

// The server's event callback owns the entry that owns the run handle; the handle's
// state owns the callback. The run's end must break that cycle.
TEST(RuntimeRetention, AHandleWhoseCallbackOwnsItIsFreedWhenTheRunEnds) {
  auto runtime = arbor::testing::make_runtime();
  ASSERT_NE(runtime, nullptr);
  auto sentinel = std::make_shared<int>(0);
  std::weak_ptr<int> watch = sentinel;
  auto holder = std::make_shared<std::optional<RunHandle>>();
  auto handle = runtime->start(R"({"name":"one","agents":[{"id":"a","task":"Hi","generation":{"max_tokens":1}}]})",
                               {.on_event = [holder, sentinel](const Event&) {}, .workflow_is_text = true});
  ASSERT_TRUE(handle.has_value()) << handle.error().describe();
  *holder = *handle;  // the cycle: state -> callback -> holder -> handle -> state
  sentinel.reset();
  EXPECT_EQ(handle->wait().status, RunStatus::ok);
  EXPECT_TRUE(watch.expired());
}

}  // namespace
}  // namespace arbor::server::test

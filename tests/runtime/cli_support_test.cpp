// The CLI's testable parts (runtime/cli/, library arbor_cli_support): the progress
// line and its current rate, how `arbor run` hands --input values to several
// workflows, option checks, and runtime messages worded with the flags' names.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "runtime/cli/options.hpp"
#include "runtime/cli/progress.hpp"
#include "runtime/cli/runtime_options.hpp"
#include "runtime/cli/workflow_inputs.hpp"

namespace arbor::cli {
namespace {

using std::chrono::milliseconds;
const ProgressClock::time_point t0{};  // any fixed origin: the meters take times as given

// The reference: events in (now - window, now], over min(window, now - start).
double reference_rate(const std::vector<ProgressClock::time_point>& events, ProgressClock::time_point start,
                      ProgressClock::time_point now, ProgressClock::duration window) {
  std::size_t n = 0;
  for (auto t : events) n += t > now - window && t <= now;
  const double seconds = std::chrono::duration<double>(std::min(window, now - start)).count();
  return seconds > 0 ? double(n) / seconds : 0;
}

TEST(CliProgress, RateMeterMatchesTheReferenceOnRandomBursts) {
  std::mt19937 rng(7);
  const auto window = std::chrono::seconds(1);
  RateMeter meter(t0, window);
  std::vector<ProgressClock::time_point> events;
  auto now = t0;
  for (int step = 0; step < 2000; ++step) {
    // Bursts and pauses: sometimes a long gap, sometimes many events in one instant.
    now += milliseconds(rng() % 10 == 0 ? 1500 : rng() % 40);
    const int burst = int(rng() % 4);
    for (int i = 0; i < burst; ++i) {
      meter.add(now);
      events.push_back(now);
    }
    ASSERT_DOUBLE_EQ(meter.rate(now), reference_rate(events, t0, now, window)) << "step " << step;
  }
}

TEST(CliProgress, RateIsCurrentNotSinceTheStart) {
  RateMeter meter(t0, std::chrono::seconds(1));
  for (int i = 1; i <= 50; ++i) meter.add(t0 + milliseconds(10 * i));
  EXPECT_DOUBLE_EQ(meter.rate(t0 + milliseconds(500)), 50.0 / 0.5);  // shorter than the window so far
  for (int i = 51; i <= 100; ++i) meter.add(t0 + milliseconds(10 * i));  // 100 tokens in the first second
  EXPECT_DOUBLE_EQ(meter.rate(t0 + milliseconds(1000)), 100.0);
  EXPECT_DOUBLE_EQ(meter.rate(t0 + milliseconds(1500)), 50.0);       // those of 510..1000 ms
  EXPECT_DOUBLE_EQ(meter.rate(t0 + milliseconds(6000)), 0.0);        // 5 s of silence: 0, not 100 / 6
  meter.add(t0 + milliseconds(6100), 30);
  EXPECT_DOUBLE_EQ(meter.rate(t0 + milliseconds(6200)), 30.0);
}

Event event(Event::Kind kind, std::string run, std::string agent, EventStatus status = {}, double hit = 0) {
  Event e;
  e.kind = kind;
  e.run_id = std::move(run);
  e.agent_id = std::move(agent);
  e.status = status;
  e.cache.hit_ratio = hit;
  return e;
}

TEST(CliProgress, TrackerCountsTotalRunningDoneAndFailedApart) {
  ProgressTracker tracker(t0);
  tracker.add_agents(3);
  tracker.add_agents(2);
  using K = Event::Kind;
  // The same agent id in two runs is two agents.
  tracker.on_event(event(K::agent_started, "run-0", "a"), t0);
  tracker.on_event(event(K::agent_started, "run-1", "a"), t0);
  tracker.on_event(event(K::agent_started, "run-0", "b"), t0);
  for (int i = 0; i < 10; ++i) tracker.on_event(event(K::token, "run-0", "a"), t0 + milliseconds(100 * i));
  tracker.on_event(event(K::agent_finished, "run-0", "a", AgentStatus::ok, 0.25), t0 + milliseconds(1000));
  tracker.on_event(event(K::agent_finished, "run-1", "a", AgentStatus::timeout, 0.5), t0 + milliseconds(1000));
  // An agent whose dependency failed finishes without having started.
  tracker.on_event(event(K::agent_finished, "run-1", "c", AgentStatus::failed, 0.5), t0 + milliseconds(1000));
  ProgressCounts c = tracker.counts(t0 + milliseconds(1050));
  EXPECT_EQ(c.total, 5u);
  EXPECT_EQ(c.running, 1u);
  EXPECT_EQ(c.done, 1u);
  EXPECT_EQ(c.failed, 2u);
  EXPECT_DOUBLE_EQ(c.hit_ratio, 0.5);
  EXPECT_DOUBLE_EQ(c.tokens_per_s, 9.0);  // tokens at 100..900 ms are within the last second
  EXPECT_EQ(format_progress(c),
            "[arbor] agents 5: 1 running, 1 done, 2 failed, 1 waiting | 9.0 tokens/s | cache hit 50%");
}

// Instances of a fan-out decided at run time (for_each.output) are not among the ids a
// run starts with: each joins the total when it first appears, once.
TEST(CliProgress, RunTimeFanOutInstancesJoinTheTotal) {
  const auto t0 = ProgressClock::now();
  ProgressTracker tracker(t0);
  using K = Event::Kind;
  tracker.add_agents("run-0", {"planner", "lead"});
  tracker.on_event(event(K::agent_started, "run-0", "planner"), t0);
  tracker.on_event(event(K::agent_finished, "run-0", "planner", AgentStatus::ok, 0.0), t0);
  tracker.on_event(event(K::agent_started, "run-0", "lead"), t0);
  for (const char* w : {"worker[0]", "worker[1]", "worker[2]"}) tracker.on_event(event(K::agent_started, "run-0", w), t0);
  tracker.on_event(event(K::agent_finished, "run-0", "worker[0]", AgentStatus::ok, 0.0), t0);
  tracker.on_event(event(K::agent_finished, "run-0", "worker[3]", AgentStatus::cancelled, 0.0), t0);  // never started
  ProgressCounts c = tracker.counts(t0);
  EXPECT_EQ(c.total, 6u);
  EXPECT_EQ(c.running, 3u);
  EXPECT_EQ(c.done, 2u);
  EXPECT_EQ(c.failed, 1u);
  EXPECT_EQ(format_progress(c), "[arbor] agents 6: 3 running, 2 done, 1 failed, 0 waiting | 0.0 tokens/s | cache hit 0%");
}

// A tool call counts until its result (or timeout) comes back; the line shows tools
// only once one was called.
TEST(CliProgress, ToolCallsAndResultsShowOnTheLine) {
  const auto t0 = ProgressClock::now();
  ProgressTracker tracker(t0);
  tracker.add_agents(2);
  using K = Event::Kind;
  tracker.on_event(event(K::agent_started, "run-0", "a"), t0);
  EXPECT_EQ(format_progress(tracker.counts(t0)),
            "[arbor] agents 2: 1 running, 0 done, 0 failed, 1 waiting | 0.0 tokens/s | cache hit 0%");
  tracker.on_event(event(K::tool_call, "run-0", "a"), t0);
  tracker.on_event(event(K::tool_call, "run-0", "b"), t0);
  tracker.on_event(event(K::tool_result, "run-0", "a", ToolStatus::ok), t0);
  ProgressCounts c = tracker.counts(t0);
  EXPECT_EQ(c.tool_calls, 2u);
  EXPECT_EQ(c.tools_running, 1u);
  EXPECT_EQ(format_progress(c),
            "[arbor] agents 2: 1 running, 0 done, 0 failed, 1 waiting | 0.0 tokens/s | cache hit 0% | tools 2 calls, "
            "1 running");
  tracker.on_event(event(K::tool_result, "run-0", "b", ToolStatus::timeout), t0);
  EXPECT_EQ(tracker.counts(t0).tools_running, 0u);
}

TEST(CliProgress, LineFormat) {
  ProgressCounts c;
  c.total = 12;
  c.running = 3;
  c.done = 7;
  c.failed = 1;
  c.tokens_per_s = 35.24;
  c.hit_ratio = 0.636;
  EXPECT_EQ(format_progress(c),
            "[arbor] agents 12: 3 running, 7 done, 1 failed, 1 waiting | 35.2 tokens/s | cache hit 64%");
}

using Declared = std::vector<std::optional<std::set<std::string>>>;

TEST(CliInputs, EachWorkflowGetsTheInputsItDeclares) {
  const std::vector<std::string> paths = {"dir/a.json", "dir/b.json", "dir/c.json"};
  const Declared declared = {std::set<std::string>{"topic"}, std::set<std::string>{}, std::set<std::string>{"topic", "n"}};
  auto routed = route_inputs(paths, declared, {{"topic", "rust"}, {"n", "3"}});
  ASSERT_TRUE(routed) << routed.error().message;
  ASSERT_EQ(routed->size(), 3u);
  EXPECT_EQ((*routed)[0], (workflows::InputOverrides{{"topic", "rust"}}));
  EXPECT_EQ((*routed)[1], workflows::InputOverrides{});
  EXPECT_EQ((*routed)[2], (workflows::InputOverrides{{"topic", "rust"}, {"n", "3"}}));
}

TEST(CliInputs, AnInputNoWorkflowDeclaresIsNamed) {
  const std::vector<std::string> paths = {"dir/a.json", "dir/b.json"};
  const Declared declared = {std::set<std::string>{"topic"}, std::set<std::string>{}};
  auto routed = route_inputs(paths, declared, {{"topik", "rust"}});
  ASSERT_FALSE(routed);
  EXPECT_EQ(routed.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(routed.error().message,
            "--input topik=rust: none of the 2 workflows declares an input 'topik' (a.json declares topic; "
            "b.json declares none)");
}

TEST(CliInputs, OneWorkflowOrAnUnreadableOneGetsEverything) {
  // One workflow: its loader names an undeclared input (with "did you mean").
  auto one = route_inputs({"a.json"}, {std::set<std::string>{"topic"}}, {{"topik", "x"}});
  ASSERT_TRUE(one);
  EXPECT_EQ((*one)[0], (workflows::InputOverrides{{"topik", "x"}}));
  // An unreadable file reports its own error when it starts; it takes every input.
  auto some = route_inputs({"a.json", "broken.json"}, {std::set<std::string>{"topic"}, std::nullopt},
                           {{"topic", "x"}, {"other", "y"}});
  ASSERT_TRUE(some);
  EXPECT_EQ((*some)[0], (workflows::InputOverrides{{"topic", "x"}}));
  EXPECT_EQ((*some)[1], (workflows::InputOverrides{{"topic", "x"}, {"other", "y"}}));
}

std::string write_file(const std::string& name, const std::string& text) {
  const std::string path = std::string(ARBOR_BINARY_DIR) + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(CliInputs, DeclaredInputsOfAFile) {
  EXPECT_EQ(declared_inputs(std::string(ARBOR_SOURCE_DIR) + "/workflows/examples/research_team.json"),
            (std::set<std::string>{"questions", "topic"}));
  EXPECT_EQ(declared_inputs(write_file("cli_no_inputs.json", R"({"name": "x", "agents": []})")),
            std::set<std::string>{});
  EXPECT_EQ(declared_inputs(std::string(ARBOR_BINARY_DIR) + "/does_not_exist.json"), std::nullopt);
  EXPECT_EQ(declared_inputs(write_file("cli_broken.json", R"({"inputs": {"a": )")), std::nullopt);
  EXPECT_EQ(declared_inputs(write_file("cli_overflow.json", R"({"inputs": {"a": {"default": 1e999}}})")),
            std::nullopt);
  EXPECT_EQ(declared_inputs(write_file("cli_inputs_list.json", R"({"inputs": ["a"]})")), std::nullopt);
}

TEST(CliWording, ConfigNamesBecomeFlags) {
  EXPECT_EQ(cli_wording("request needs 9 KV pages; raise kv_memory_mb or lower max_tokens"),
            "request needs 9 KV pages; raise --kv-mem or lower max_tokens");
  EXPECT_EQ(cli_wording("raise kv_memory_mb or lower max_tokens", {{"max_tokens", "--max-tokens"}}),
            "raise --kv-mem or lower --max-tokens");
  EXPECT_EQ(cli_wording("kv_memory_mb 1 holds no KV page"), "--kv-mem 1 holds no KV page");
  EXPECT_EQ(cli_wording("my_kv_memory_mb and kv_memory_mbs stay"), "my_kv_memory_mb and kv_memory_mbs stay");
}

// Runs a check the way CLI11 does; returns its message ("" = accepted).
std::string check(const CLI::Validator& v, std::string value) { return v(value); }

TEST(CliOptions, ChecksSayWhatWasExpected) {
  EXPECT_EQ(check(integer_in(0, 4096), "12"), "");
  EXPECT_EQ(check(integer_in(0, 4096), "abc"), "expects an integer in 0..4096, got 'abc'");
  EXPECT_EQ(check(integer_in(0, 4096), "-1"), "expects an integer in 0..4096, got '-1'");
  EXPECT_EQ(check(integer_in(0, 4096), "1.5"), "expects an integer in 0..4096, got '1.5'");
  EXPECT_EQ(check(number_in(0, 1), "0.5"), "");
  EXPECT_EQ(check(number_in(0, 1), "1e999"), "expects a number in 0..1, got '1e999'");
  EXPECT_EQ(check(number_in(0, 1), "nan"), "expects a number in 0..1, got 'nan'");
  EXPECT_EQ(check(one_of({"lru", "lfu"}), "lfu"), "");
  EXPECT_EQ(check(one_of({"lru", "lfu"}), "random"), "expects one of lru|lfu, got 'random'");
  EXPECT_EQ(check(integer_list_in(1, 64), "1,8,32"), "");
  EXPECT_EQ(check(integer_list_in(1, 64), "1,,3"), "expects a comma list of integers in 1..64, got '' in '1,,3'");
  EXPECT_EQ(check(integer_list_in(1, 64), "65"), "expects a comma list of integers in 1..64, got '65' in '65'");
  EXPECT_EQ(parse_integer_list("1,8,32"), (std::vector<int>{1, 8, 32}));
}

}  // namespace
}  // namespace arbor::cli

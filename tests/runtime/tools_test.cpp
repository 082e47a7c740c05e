// Tools end to end on the real model (issue 11 section 3): a forced call whose
// constrained JSON parses, the tool runs, its result joins the conversation (prefilled
// over the cached history) and the agent answers; a C++ tool registered on the
// Runtime; tools that fail, hang past their timeout or return invalid UTF-8; the
// max_tool_calls budget. Every case ends with a clean cache (CleanRuntimeTest).
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>

#include "runtime_test_util.hpp"
#include "workflows/calculator.hpp"

namespace arbor::testing {
namespace {

// One agent that must call one of `tools` first (tool_choice "required").
std::string tool_workflow(const std::string& task, const nlohmann::json& tools, const nlohmann::json& extra = {}) {
  nlohmann::json agent = {{"id", "solver"},   {"prefix", "p"},          {"task", task},
                          {"tools", tools},   {"tool_choice", "required"}, {"max_tool_calls", 1},
                          {"generation", {{"max_tokens", 24}, {"temperature", 0}}}};
  if (extra.is_object()) agent.update(extra);
  nlohmann::json wf = {{"name", "tools"},
                       {"prefixes", {{"p", {{"system", "You are a careful assistant. Use the tools you are given."}}}}},
                       {"agents", nlohmann::json::array({agent})}};
  return wf.dump();
}

const AgentResult& only_agent(const RunResult& r) {
  EXPECT_EQ(r.agents.size(), 1u);
  return r.agents.at(0);
}

class RuntimeTools : public CleanRuntimeTest {};

TEST_F(RuntimeTools, ForcedCalculatorCallRunsAndTheAgentAnswersAfterIt) {
  auto r = run_text(*rt_, tool_workflow("What is 12 times 7? Use the calculator.", {"calculator"}));
  ASSERT_EQ(r.status, RunStatus::ok) << r.error << to_json(r);
  const auto& a = only_agent(r);
  ASSERT_EQ(a.tool_calls, 1) << to_json(r);
  ASSERT_EQ(a.tool_trace.size(), 1u);
  const auto& call = a.tool_trace[0];
  EXPECT_EQ(call.name, "calculator");
  // The constrained call is a document of the calculator's schema...
  auto args = nlohmann::json::parse(call.arguments);
  ASSERT_TRUE(args.contains("expression") && args["expression"].is_string()) << call.arguments;
  // ...and the tool's answer is what the evaluator gives for it.
  auto expected = workflows::evaluate_expression(args["expression"].get<std::string>());
  if (expected) {
    EXPECT_EQ(call.status, ToolStatus::ok);
    EXPECT_EQ(call.result, workflows::format_number(*expected));
  } else {
    EXPECT_EQ(call.status, ToolStatus::error);
    EXPECT_EQ(call.result, "error: cannot evaluate '" + args["expression"].get<std::string>() + "': " + expected.error());
  }
  EXPECT_FALSE(a.output.empty());  // the answer after the result
  EXPECT_GT(a.tool_ms, 0);
  // After the result only the new messages were prefilled, plus at most the history's
  // last partial page (page_size 16): the rest came from the cache.
  EXPECT_LT(a.tool_recomputed_tokens, 16u) << to_json(r);
  EXPECT_EQ(a.prompt_tokens, a.cached_tokens + a.computed_tokens);
  EXPECT_GT(a.cached_tokens, 0u);
  // The run document shows the calls.
  auto doc = nlohmann::json::parse(to_json(r));
  EXPECT_EQ(doc["agents"][0]["tool_calls"], 1);
  EXPECT_EQ(doc["agents"][0]["tool_trace"][0]["name"], "calculator");
}

TEST_F(RuntimeTools, CppToolRegisteredOnTheRuntimeGetsValidArguments) {
  std::promise<std::string> seen;
  auto seen_future = seen.get_future();
  ToolDefinition weather{"weather", "The weather in a city.",
                         R"({"type":"object","properties":{"city":{"type":"string","enum":["Paris","Rome"]}},)"
                         R"("required":["city"],"additionalProperties":false})",
                         [&seen](const nlohmann::ordered_json& args) -> Result<std::string> {
                           seen.set_value(args.dump());
                           return "sunny, 21 C";
                         }};
  ASSERT_TRUE(rt_->add_tool(weather));
  EXPECT_EQ(rt_->tool_names(), (std::vector<std::string>{"calculator", "read_file", "weather"}));
  auto r = run_text(*rt_, tool_workflow("What is the weather in Paris?", {"weather"}));
  ASSERT_EQ(r.status, RunStatus::ok) << r.error;
  const auto& a = only_agent(r);
  ASSERT_EQ(a.tool_trace.size(), 1u);
  const std::string args = seen_future.get();
  EXPECT_TRUE(args == R"({"city":"Paris"})" || args == R"({"city":"Rome"})") << args;
  EXPECT_EQ(a.tool_trace[0].arguments, args);
  EXPECT_EQ(a.tool_trace[0].status, ToolStatus::ok);
  EXPECT_EQ(a.tool_trace[0].result, "sunny, 21 C");
}

TEST_F(RuntimeTools, AddToolAndUnknownNamesAreClearErrors) {
  auto handler = [](const nlohmann::ordered_json&) -> Result<std::string> { return "x"; };
  auto clash = rt_->add_tool({"calculator", "mine", R"({"type":"object"})", handler});
  ASSERT_FALSE(clash);
  EXPECT_NE(clash.error().message.find("tool 'calculator' is already registered"), std::string::npos);
  auto bad = rt_->add_tool({"t", "d", R"({"type":"object","properties":{"n":{"type":"number","multipleOf":2}}})", handler});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("multipleOf"), std::string::npos);
  auto none = rt_->add_tool({"t", "d", R"({"type":"object"})", nullptr});
  ASSERT_FALSE(none);
  auto start = rt_->start(tool_workflow("Hi", {"calculator", "shell"}),
                          {.workflow_is_text = true, .documents = DocumentAccess::local_to(kExamples)});
  ASSERT_FALSE(start);
  EXPECT_EQ(start.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(start.error().message.find("/agents/0/tools/1"), std::string::npos) << start.error().message;
  EXPECT_NE(start.error().message.find("unknown tool 'shell' (agent 'solver'); known tools: calculator, read_file"),
            std::string::npos)
      << start.error().message;
}

// A tool's failure reaches the model as an error result; the agent goes on.
TEST_F(RuntimeTools, FailingAndThrowingToolsGiveTheModelAnError) {
  ASSERT_TRUE(rt_->add_tool({"broken", "Always fails.", R"({"type":"object","properties":{"x":{"type":"integer"}}})",
                             [](const nlohmann::ordered_json&) -> Result<std::string> {
                               return fail(ErrorCode::failed, "the backend is down");
                             }}));
  ASSERT_TRUE(rt_->add_tool({"thrower", "Always throws.", R"({"type":"object","properties":{"x":{"type":"integer"}}})",
                             [](const nlohmann::ordered_json&) -> Result<std::string> {
                               throw std::runtime_error("boom");
                             }}));
  for (const std::string name : {"broken", "thrower"}) {
    auto r = run_text(*rt_, tool_workflow("Call the tool.", {name}));
    ASSERT_EQ(r.status, RunStatus::ok) << name << ": " << r.error;
    const auto& a = only_agent(r);
    ASSERT_EQ(a.tool_trace.size(), 1u) << name;
    EXPECT_EQ(a.tool_trace[0].status, ToolStatus::error);
    EXPECT_EQ(a.tool_trace[0].result, name == "broken" ? "error: the backend is down"
                                                        : "error: the tool threw an exception: boom");
  }
}

TEST_F(RuntimeTools, InvalidUtf8FromAToolBecomesAnErrorResult) {
  ASSERT_TRUE(rt_->add_tool({"garbled", "Returns bytes.", R"({"type":"object","properties":{"x":{"type":"integer"}}})",
                             [](const nlohmann::ordered_json&) -> Result<std::string> {
                               return std::string("ok \xff\xfe tail");
                             }}));
  auto r = run_text(*rt_, tool_workflow("Call the tool.", {"garbled"}));
  ASSERT_EQ(r.status, RunStatus::ok) << r.error;
  const auto& a = only_agent(r);
  ASSERT_EQ(a.tool_trace.size(), 1u);
  EXPECT_EQ(a.tool_trace[0].status, ToolStatus::error);
  EXPECT_EQ(a.tool_trace[0].result, "error: the tool returned text that is not valid UTF-8 (10 bytes); nothing of it is shown");
  EXPECT_TRUE(nlohmann::json::accept(to_json(r)));
}

// A handler that never returns on its own: past tool_timeout_ms the model gets a
// timeout error and the run finishes while the handler is still blocked; when it
// returns at last, its result is dropped.
TEST_F(RuntimeTools, HangingToolTimesOutWithoutBlockingTheRun) {
  auto release = std::make_shared<std::promise<void>>();
  auto released = release->get_future().share();
  auto returned = std::make_shared<std::atomic<bool>>(false);
  ASSERT_TRUE(rt_->add_tool({"stuck", "Never answers.", R"({"type":"object","properties":{"x":{"type":"integer"}}})",
                             [released, returned](const nlohmann::ordered_json&) -> Result<std::string> {
                               released.wait();
                               returned->store(true);
                               return "late";
                             }}));
  auto r = run_text(*rt_, tool_workflow("Call the tool.", {"stuck"}, {{"tool_timeout_ms", 300}}));
  EXPECT_FALSE(returned->load());  // the run ended while the handler was blocked
  ASSERT_EQ(r.status, RunStatus::ok) << r.error;
  const auto& a = only_agent(r);
  ASSERT_EQ(a.tool_trace.size(), 1u);
  EXPECT_EQ(a.tool_trace[0].status, ToolStatus::timeout);
  EXPECT_EQ(a.tool_trace[0].result,
            "error: the tool did not answer within 300 ms (tool_timeout_ms); a result that comes later is dropped");
  EXPECT_FALSE(a.output.empty());
  release->set_value();
  while (!returned->load()) std::this_thread::yield();  // the late result is dropped, nothing crashes
}

// The run's event callback hears each call (name, arguments) before its result
// (status, time, size), and they agree with the run document's tool_trace.
TEST_F(RuntimeTools, CallsAndResultsAreRunEvents) {
  std::mutex mu;
  std::vector<Event> events;
  RunOptions options;
  options.workflow_is_text = true;
  options.documents = DocumentAccess::local_to(kExamples);
  options.on_event = [&](const Event& e) {
    if (e.kind != Event::Kind::tool_call && e.kind != Event::Kind::tool_result) return;
    std::lock_guard lock(mu);
    events.push_back(e);
  };
  auto h = rt_->start(tool_workflow("What is 12 times 7? Use the calculator.", {"calculator"}), std::move(options));
  ASSERT_TRUE(h) << h.error().describe();
  const RunResult r = h->wait();
  ASSERT_EQ(r.status, RunStatus::ok) << r.error;
  const auto& trace = only_agent(r).tool_trace;
  ASSERT_EQ(trace.size(), 1u);
  std::lock_guard lock(mu);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].kind, Event::Kind::tool_call);
  EXPECT_EQ(events[0].run_id, r.run_id);
  EXPECT_EQ(events[0].agent_id, "solver");
  EXPECT_EQ(events[0].tool, "calculator");
  EXPECT_EQ(events[0].text, trace[0].arguments);
  EXPECT_EQ(events[1].kind, Event::Kind::tool_result);
  EXPECT_EQ(events[1].tool, "calculator");
  EXPECT_EQ(events[1].status, EventStatus(trace[0].status));
  EXPECT_EQ(events[1].tool_bytes, trace[0].result.size());
  EXPECT_DOUBLE_EQ(events[1].tool_ms, trace[0].ms);
}

// The budget is per attempt, across turns: with max_tool_calls 1 the first turn's
// forced call spends it, and the second turn answers without tools.
TEST_F(RuntimeTools, MaxToolCallsWithdrawsTheToolsOnceSpent) {
  std::atomic<int> calls{0};
  ASSERT_TRUE(rt_->add_tool({"counter", "Counts.", R"({"type":"object","properties":{"x":{"type":"integer"}}})",
                             [&calls](const nlohmann::ordered_json&) -> Result<std::string> {
                               return std::to_string(++calls);
                             }}));
  auto r = run_text(*rt_, tool_workflow("Count once.", {"counter"},
                                        {{"turns", {"Count again, with the tool."}}}));
  ASSERT_EQ(r.status, RunStatus::ok) << r.error;
  const auto& a = only_agent(r);
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(a.tool_calls, 1);
  EXPECT_EQ(a.tool_trace.size(), 1u);
  EXPECT_FALSE(a.output.empty());
}

}  // namespace
}  // namespace arbor::testing

// The outcome enums (common/status.hpp): every value's name parses back to it, the
// names are the wire names the JSON documents and the OpenAI API write, and an unknown
// name is invalid_argument listing the allowed ones.
#include "common/status.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

namespace arbor {
namespace {

// Every value of the table round-trips through its name, and the names are `expected`.
template <class Enum, std::size_t N, class Parse>
void expect_round_trip(const EnumNames<Enum, N>& table, Parse parse, const std::vector<std::string>& names,
                       const std::vector<std::string>& expected) {
  EXPECT_EQ(names, expected);
  for (const auto& [name, value] : table) {
    EXPECT_EQ(to_string(value), name);
    auto parsed = parse(name);
    ASSERT_TRUE(parsed) << name;
    EXPECT_EQ(*parsed, value) << name;
  }
}

TEST(Status, FinishReasonNamesRoundTrip) {
  expect_round_trip(status_names::finish_reason, parse_finish_reason, finish_reason_names(),
                    {"stop", "length", "cancelled", "tool_calls", "prefill", "error"});
  EXPECT_STREQ(to_string(FinishReason::tool_calls), "tool_calls");
  const auto bad = parse_finish_reason("eos");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(bad.error().message, "must be stop, length, cancelled, tool_calls, prefill or error (got 'eos')");
}

TEST(Status, ToolStatusNamesRoundTrip) {
  expect_round_trip(status_names::tool, parse_tool_status, tool_status_names(), {"ok", "error", "timeout"});
  const auto bad = parse_tool_status("failed");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(bad.error().message, "must be ok, error or timeout (got 'failed')");
}

TEST(Status, AgentStatusNamesRoundTrip) {
  expect_round_trip(status_names::agent, parse_agent_status, agent_status_names(),
                    {"ok", "failed", "cancelled", "timeout", "pending", "running"});
  const auto bad = parse_agent_status("OK");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(bad.error().message, "must be ok, failed, cancelled, timeout, pending or running (got 'OK')");
}

TEST(Status, RunStatusNamesRoundTrip) {
  expect_round_trip(status_names::run, parse_run_status, run_status_names(), {"ok", "failed", "cancelled", "running"});
  const auto bad = parse_run_status("");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(bad.error().message, "must be ok, failed, cancelled or running (got '')");
}

// An event's status is none (""), or the name of the agent's, run's or tool call's.
TEST(Status, EventStatusNamesItsAlternative) {
  EXPECT_STREQ(to_string(EventStatus{}), "");
  EXPECT_STREQ(to_string(EventStatus{AgentStatus::running}), "running");
  EXPECT_STREQ(to_string(EventStatus{RunStatus::cancelled}), "cancelled");
  EXPECT_STREQ(to_string(EventStatus{ToolStatus::timeout}), "timeout");
  EXPECT_NE(EventStatus{AgentStatus::ok}, EventStatus{RunStatus::ok});  // same name, other concept
}

// JSON and streams write the name, never the enum's integer.
TEST(Status, JsonAndStreamsWriteTheName) {
  const nlohmann::json j = {{"finish_reason", FinishReason::length},
                            {"tool", ToolStatus::error},
                            {"agent", AgentStatus::timeout},
                            {"run", RunStatus::failed}};
  EXPECT_EQ(j.dump(), R"({"agent":"timeout","finish_reason":"length","run":"failed","tool":"error"})");
  nlohmann::ordered_json o;
  o["status"] = RunStatus::running;
  EXPECT_EQ(o.dump(), R"({"status":"running"})");
  std::ostringstream os;
  os << FinishReason::prefill << ' ' << AgentStatus::pending << ' ' << EventStatus{ToolStatus::ok};
  EXPECT_EQ(os.str(), "prefill pending ok");
}

}  // namespace
}  // namespace arbor

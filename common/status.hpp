// How a generation, a tool call, an agent and a run ended: one enum per concept, for
// every layer. The actors carry them in their messages (actors/messages.hpp: SeqResult,
// ToolCallRecord, ToolEvent, AgentReport), the embedding API returns them
// (arbor/runtime.hpp: GenerateResult, ToolCallInfo, AgentResult, RunResult, Event), and
// the front ends write their names: the JSON documents (to_json below, found by ADL),
// the runs SSE, `arbor run` and the OpenAI API. A name is written once, in the tables
// below; to_string, the parse_* functions, the name lists and JSON all read them.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "common/enum_names.hpp"
#include "common/result.hpp"

namespace arbor {

// Why a generation ended (actors::SeqResult, GenerateResult).
enum class FinishReason {
  stop,        // an end-of-generation token or a stop string; with a JSON Schema, the document is complete
  length,      // max_tokens reached (or a tool call cut by it)
  cancelled,   // cancelled, or its run ended, before it finished
  tool_calls,  // the reply is a tool call (GenerateResult::tool_calls)
  prefill,     // max_tokens 0: the prompt was computed and cached, nothing generated
  error,       // the request failed (GenerationHandle::wait(): the text is the error)
};

// How one tool call ended (ToolCallInfo, tool_result events).
enum class ToolStatus {
  ok,
  error,    // the handler failed, threw, or returned invalid UTF-8
  timeout,  // the agent's tool_timeout_ms passed first
};

// An agent's state (AgentResult, agent events). An agent that reported is ok, failed,
// cancelled or timeout; a run's snapshot says pending for the others; running is the
// agent_started event's status.
enum class AgentStatus { ok, failed, cancelled, timeout, pending, running };

// A run's state (RunResult, run events): running until it ends ok, failed or cancelled.
enum class RunStatus { ok, failed, cancelled, running };

// An event's status (arbor::Event, actors::RunEvent): none for token and tool_call
// events, the agent's for agent events, the run's for run events, the call's for
// tool_result.
using EventStatus = std::variant<std::monostate, AgentStatus, RunStatus, ToolStatus>;

namespace status_names {
inline constexpr EnumNames<FinishReason, 6> finish_reason = {{{"stop", FinishReason::stop},
                                                              {"length", FinishReason::length},
                                                              {"cancelled", FinishReason::cancelled},
                                                              {"tool_calls", FinishReason::tool_calls},
                                                              {"prefill", FinishReason::prefill},
                                                              {"error", FinishReason::error}}};
inline constexpr EnumNames<ToolStatus, 3> tool = {
    {{"ok", ToolStatus::ok}, {"error", ToolStatus::error}, {"timeout", ToolStatus::timeout}}};
inline constexpr EnumNames<AgentStatus, 6> agent = {{{"ok", AgentStatus::ok},
                                                     {"failed", AgentStatus::failed},
                                                     {"cancelled", AgentStatus::cancelled},
                                                     {"timeout", AgentStatus::timeout},
                                                     {"pending", AgentStatus::pending},
                                                     {"running", AgentStatus::running}}};
inline constexpr EnumNames<RunStatus, 4> run = {{{"ok", RunStatus::ok},
                                                 {"failed", RunStatus::failed},
                                                 {"cancelled", RunStatus::cancelled},
                                                 {"running", RunStatus::running}}};
}  // namespace status_names

// The wire names ("tool_calls", "timeout"), and back: an unknown name is
// invalid_argument listing the names, "must be ok, error or timeout (got 'x')" (the
// caller puts where in front).
inline const char* to_string(FinishReason r) { return name_of(status_names::finish_reason, r); }
inline const char* to_string(ToolStatus s) { return name_of(status_names::tool, s); }
inline const char* to_string(AgentStatus s) { return name_of(status_names::agent, s); }
inline const char* to_string(RunStatus s) { return name_of(status_names::run, s); }
// "" for none.
inline const char* to_string(const EventStatus& s) {
  return std::visit(
      [](auto v) -> const char* {
        if constexpr (std::is_same_v<decltype(v), std::monostate>) {
          return "";
        } else {
          return to_string(v);
        }
      },
      s);
}

inline Result<FinishReason> parse_finish_reason(std::string_view name) {
  return parse_name(status_names::finish_reason, name);
}
inline Result<ToolStatus> parse_tool_status(std::string_view name) { return parse_name(status_names::tool, name); }
inline Result<AgentStatus> parse_agent_status(std::string_view name) { return parse_name(status_names::agent, name); }
inline Result<RunStatus> parse_run_status(std::string_view name) { return parse_name(status_names::run, name); }

inline std::vector<std::string> finish_reason_names() { return names_of(status_names::finish_reason); }
inline std::vector<std::string> tool_status_names() { return names_of(status_names::tool); }
inline std::vector<std::string> agent_status_names() { return names_of(status_names::agent); }
inline std::vector<std::string> run_status_names() { return names_of(status_names::run); }

// Printing (logs, test failures) writes the name.
inline std::ostream& operator<<(std::ostream& os, FinishReason r) { return os << to_string(r); }
inline std::ostream& operator<<(std::ostream& os, ToolStatus s) { return os << to_string(s); }
inline std::ostream& operator<<(std::ostream& os, AgentStatus s) { return os << to_string(s); }
inline std::ostream& operator<<(std::ostream& os, RunStatus s) { return os << to_string(s); }
inline std::ostream& operator<<(std::ostream& os, const EventStatus& s) { return os << to_string(s); }

// JSON writes the name (nlohmann::json and ordered_json find these by ADL; more
// specialized than the library's own enum-as-integer conversion).
template <class Json>
void to_json(Json& j, const FinishReason& r) {
  j = to_string(r);
}
template <class Json>
void to_json(Json& j, const ToolStatus& s) {
  j = to_string(s);
}
template <class Json>
void to_json(Json& j, const AgentStatus& s) {
  j = to_string(s);
}
template <class Json>
void to_json(Json& j, const RunStatus& s) {
  j = to_string(s);
}

}  // namespace arbor

// ToolLoop: the tool calls inside one agent turn (issue 11 section 3), in the Hermes
// format of model/tool_format.hpp. Owned by the agent actor (one per attempt of an
// agent with "tools"), driven on the actor's thread.
//
// One turn:
//   1. free text with "<tool_call>" as a stop string (tool_choice "required": the first
//      round skips this and starts the reply with "<tool_call>" itself);
//   2. when the stop fires: a request constrained to tool_call_schema() continues the
//      same reply after "<tool_call>\n" ({"name": one of the tools, "arguments": valid
//      for it}), then "\n</tool_call>" is appended (actors/tool_call_steps.hpp);
//   3. the handler runs on its own thread (ToolRunner) with tool_timeout_ms; its result
//      goes back as a "<tool_response>" user message and the turn continues at 1. Each
//      request extends the previous prompt id for id, so the cache matches the whole
//      history and prefills only the new messages (plus the history's last, partial
//      page: only full pages are shared), counted as tool_recomputed_tokens.
// Decisions:
//   - A tool that fails (error, exception), returns invalid UTF-8 or passes its timeout
//     gives the model an error result ("error: ...") and the turn goes on: the model may
//     recover. A result longer than kMaxToolResultBytes is cut (and says so).
//   - After max_tool_calls calls (per attempt) the tools are withdrawn: the next round
//     has no "<tool_call>" stop and its reply is the answer; an answer that still
//     writes "<tool_call>" fails the attempt ("asked for more than max_tool_calls").
//   - "required" forces one call at the start of each turn, then the model decides
//     (as the OpenAI Agents SDK resets tool_choice after a call, so it cannot loop).
//   - With an output_schema, the last turn's answer must be the document: a free answer
//     without a call is dropped and the round is asked again under the schema (the
//     prompt is cached, so only the answer is generated again).
//   - A call that does not finish within kCallTokens tokens fails the attempt.
//   - KV retention: the request that generates the call asks the scheduler to pin its
//     history (prompt + call) for RunEnv::tool_pin_ttl_ms when it finishes, so other
//     agents' memory pressure does not evict it while the tool runs; the first request
//     after the result releases the pin once admitted (its own lock holds the path
//     then). A pin left behind (the attempt ended) is released when the loop goes, and
//     in any case by its TTL or the run's end (actors/batch_engine.hpp, tool pins).
#pragma once

#include <caf/all.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/conversation.hpp"
#include "actors/messages.hpp"
#include "actors/run_env.hpp"

namespace arbor::actors {

inline constexpr std::int32_t kCallTokens = 256;
inline constexpr std::size_t kMaxToolResultBytes = 8192;

class ToolLoop {
 public:
  using Then = std::function<void(SeqResult&)>;
  // Sends one request of the agent's attempt (prompt, sampling and json_schema set);
  // `then` runs with its successful result.
  using Send = std::function<void(SeqRequest request, Then then)>;
  using Fail = std::function<void(const std::string& reason)>;
  // Tells the run about a call and its result (ToolEvent; the agent fills in its id).
  using Notify = std::function<void(ToolEvent event)>;
  // Sets a tool call's deadline: `passed` runs on the agent's thread once `timeout` has
  // passed (the agent's (tool_atom, call_id) request to itself, never answered).
  // (The loop cannot make that request itself: CAF 0.17.6's typed_actor_pointer, the
  // view of a typed actor it could hold, does not compile request().)
  using Deadline = std::function<void(std::uint64_t call_id, std::chrono::milliseconds timeout,
                                      std::function<void()> passed)>;

  // `agent` receives the handlers' ToolDone (the agent passes each to on_done).
  ToolLoop(ToolDoneListener agent, const RunEnv& env, const workflows::AgentPlan& plan, AgentReport& report,
           Send send, Fail fail, Notify notify, Deadline deadline);
  ~ToolLoop();
  ToolLoop(const ToolLoop&) = delete;
  ToolLoop& operator=(const ToolLoop&) = delete;

  // The system block describing the agent's tools (after the shared prefix's block).
  const std::string& system_text() const { return system_text_; }
  // Runs one turn of `conv` (its prompt ends with the generation prompt) with the
  // sampling of `base` (its json_schema, if any, constrains the answer; its prompt is
  // not read); `then` gets the answer.
  void turn(Conversation& conv, SeqRequest base, Then then);
  // The agent's handlers: a handler's result, and the timeout of call `call_id`.
  void on_done(ToolDone& done);

 private:
  void send(SeqRequest request, std::function<void(ToolLoop&, SeqResult&)> then);
  void round();
  void on_free(SeqResult& r, std::size_t prompt_len);
  void call(std::vector<std::int32_t> head_ids, std::string head_text);
  void on_call(SeqResult& r, std::vector<std::int32_t> head_ids, std::string head_text, std::size_t prompt_len);
  void on_timeout(std::uint64_t call_id);
  void finish_call(ToolStatus status, std::string text, double ms);
  void final_round();

  ToolDoneListener agent_;
  const RunEnv& env_;
  const workflows::AgentPlan& plan_;
  AgentReport& report_;
  Send send_;
  Fail fail_;
  Notify notify_;
  Deadline deadline_;
  std::vector<model::ToolSignature> signatures_;
  std::string system_text_, call_schema_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // guards callbacks that outlive this loop

  // Per turn:
  Conversation* conv_ = nullptr;
  SeqRequest base_;  // the turn's sampling and json_schema
  Then then_;
  bool forced_ = false;
  // Per attempt:
  int calls_ = 0;
  std::uint64_t call_id_ = 0;  // the call in flight; 0 = none
  std::chrono::steady_clock::time_point call_start_;
  ToolCallRecord record_;
  std::vector<std::int32_t> reply_ids_;  // the assistant message with the call
  std::string reply_text_;
  std::size_t known_len_ = 0;  // prompt ids whose K/V an earlier request computed
  bool after_tool_ = false;    // the next request is the first after a tool result
  std::uint64_t pin_ = 0;      // the pin holding the history while the call's tool runs
};

}  // namespace arbor::actors

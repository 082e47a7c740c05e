// Arbor's embedding API. One Runtime = one model, one actor system, one cache actor
// (which owns the KV page pool, the radix trees and the engine) shared by every
// workflow run and every generate() call made through it.
//
//   arbor::RuntimeConfig config;
//   config.model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
//   auto runtime = arbor::Runtime::create(config);          // Result<unique_ptr<Runtime>>
//   auto result = (*runtime)->run("workflows/examples/research_team.json", {});
//   std::cout << arbor::to_json(*result) << "\n";
//   auto stats = (*runtime)->cache_stats();
//
// Thread safety: every method may be called from any thread, concurrently. Callbacks
// run on runtime threads: keep them short and never call wait() from inside one.
// Lifetime: destroying the Runtime cancels what is still running and waits for it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "arbor/config.hpp"
#include "common/cache_stats.hpp"
#include "common/document_access.hpp"
#include "common/kv_event.hpp"
#include "common/result.hpp"
#include "common/sampling_settings.hpp"
#include "common/status.hpp"
#include "common/token_usage.hpp"

namespace arbor {

// RuntimeConfig, TenantOptions and their checks: arbor/config.hpp.

// A function call in a chat: one the model made (GenerateResult::tool_calls), or one an
// assistant message carries back in a later request (ChatMessage::tool_calls).
struct ChatToolCall {
  std::string id;         // "call_..." (unique); a "tool" message answers the call by it
  std::string name;
  std::string arguments;  // the arguments object as JSON text, as generated
};

struct ChatMessage {
  std::string role;  // "system" | "user" | "assistant" | "tool"
  std::string content;
  // assistant: the calls it made, rendered after its content in the format the model
  // writes them (model/tool_format.hpp), so a conversation sent back in full matches
  // the cached history.
  std::vector<ChatToolCall> tool_calls = {};
  // tool: the id of the call whose result `content` is (a <tool_response> for the
  // model; consecutive tool messages form one user turn).
  std::string tool_call_id = {};
};

// A function the model may call in a generate() request (OpenAI "tools"). Nothing runs
// it: the call comes back in GenerateResult::tool_calls, the caller runs it and sends
// the result as a "tool" message in the next request.
struct FunctionTool {
  std::string name;         // 1..64 letters, digits, '_' or '-'
  std::string description;  // shown to the model
  // JSON Schema (text) of the arguments object; the call is generated under it
  // (constrained decoding), so a keyword the engine cannot enforce is an error.
  std::string parameters = R"({"type":"object","properties":{}})";
};

// Whether the model calls a tool (OpenAI "tool_choice"):
//   automatic  the model decides: a reply may start with text and end with a call
//   none       no call: the tools stay in the prompt (its cached prefix is the same as
//              a call turn's) and a "<tool_call>" the model starts ends the reply
//   required   the reply is a call of one of the tools
//   function   the reply is a call of tool_choice_name
enum class ToolChoice { automatic, none, required, function };

// max_tokens, temperature, top_p, top_k, seed, stop: common/sampling_settings.hpp
// (one definition for every layer).
using SamplingOptions = SamplingSettings;

struct GenerateRequest {
  std::string tenant = "default";
  std::vector<ChatMessage> messages;  // rendered with the model's chat template...
  std::optional<std::string> raw_prompt;  // ...unless a raw prompt is given
  SamplingOptions sampling;
  // Constrained decoding: a JSON Schema (text; properties are generated in the order
  // written) the output must follow; `{"type":"object"}` asks for any JSON object.
  // Generation stops when the document is complete; stop strings do not apply. A
  // schema the engine cannot enforce fails the request (invalid_argument naming each
  // keyword's JSON pointer). The prompt should still ask for JSON: the constraint
  // decides which tokens may come, the model still decides what it writes.
  std::optional<std::string> json_schema;
  // Tools the model may call (one call per reply; see ToolChoice). With tools, the
  // prompt gets a system block describing them after the conversation's system message
  // (the template's default one when the messages have none), so requests with and
  // without tools share that message's KV pages. Not with raw_prompt or json_schema.
  std::vector<FunctionTool> tools = {};
  ToolChoice tool_choice = ToolChoice::automatic;
  std::string tool_choice_name = {};  // ToolChoice::function: the tool to call
};

// Model text (GenerateResult::text, AgentResult::output, Event::text, streamed pieces) is
// always valid UTF-8: a character cut by max_tokens or a stop ends as U+FFFD, and a
// streamed piece never ends inside a character.
// Its TokenUsage (common/token_usage.hpp): prompt_tokens = cached_tokens (K/V from the
// cache) + computed_tokens (prefilled by this request); generated_tokens.
struct GenerateResult : TokenUsage {
  std::string text;
  std::vector<std::int32_t> tokens;  // generated token ids
  double ttft_ms = 0;                // request accepted -> first generated token
  double prefill_ms = 0;
  double decode_ms = 0;
  // stop | length | cancelled | tool_calls; prefill with max_tokens 0 (common/status.hpp).
  FinishReason finish_reason = FinishReason::stop;
  // With json_schema: the output parsed, valid against the schema; empty when
  // generation ended before the document was complete (finish_reason length).
  std::optional<nlohmann::ordered_json> json = {};
  // With tools: the call the model made (finish_reason tool_calls; its arguments are
  // valid against the tool's parameters). `text` is then what it wrote before the call
  // (often empty), `tokens` the whole reply (text, call, "\n</tool_call>"). A call cut
  // by max_tokens is dropped: finish_reason length, text as generated before it.
  std::vector<ChatToolCall> tool_calls = {};
};

// One tool call an agent made, in order (AgentResult::tool_trace).
struct ToolCallInfo {
  std::string name;
  std::string arguments;  // the generated arguments, compact JSON
  ToolStatus status = ToolStatus::ok;  // ok | error (failed, threw, invalid UTF-8) | timeout
  std::string result;                  // what the model got back ("error: ..." when not ok)
  double ms = 0;
};

// Its TokenUsage (common/token_usage.hpp) sums the agent's own turns: prompt = cached +
// computed. A parent without a task of its own first prefills its shared prefix once so
// its sub-agents read it from the cache (a prefill-only warm-up, no output): those tokens are
// warmup_tokens, never prompt tokens, so prompt_tokens are equal with and without the
// cache and the hit ratio (cached / prompt) is not inflated by the warm-up.
struct AgentResult : TokenUsage {
  std::string id;
  std::string parent;  // "" for a root agent
  AgentStatus status = AgentStatus::pending;  // ok | failed | cancelled | timeout | pending (not run yet)
  std::string output;
  int attempts = 0;
  double ttft_ms = 0, duration_ms = 0;
  std::string error;              // set when status is not ok
  std::size_t warmup_tokens = 0;  // prefix tokens prefilled for the sub-agents (see above)
  // An agent with an output_schema: its output parsed, valid against the schema.
  std::optional<nlohmann::ordered_json> json = {};
  // Tools: calls made, time spent in them, prompt tokens prefilled again after tool
  // results beyond the new messages (only the history's last, partial KV page), and
  // each call. The tool-call requests' tokens are part of the counts above.
  int tool_calls = 0;
  double tool_ms = 0;
  std::size_t tool_recomputed_tokens = 0;
  std::vector<ToolCallInfo> tool_trace = {};
};

// A tool an application gives to its workflows' agents (Runtime::add_tool); an agent
// lists the names it may call ("tools": [...]). Built-ins: "calculator", "read_file".
struct ToolDefinition {
  std::string name;         // 1..64 letters, digits, '_' or '-'; unique in the runtime
  std::string description;  // shown to the model
  // JSON Schema (text) of the arguments object, e.g.
  // {"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}:
  // the model's call is generated under it (constrained decoding), so a keyword the
  // engine cannot enforce is an error here.
  std::string parameters;
  // Called on a thread of its own with the arguments (valid against `parameters`); the
  // text returned (or the error's message, or an exception's what()) goes back to the
  // model. A handler that takes longer than the agent's tool_timeout_ms is abandoned:
  // the model gets a timeout error and a later result is dropped; its thread cannot be
  // killed and keeps running until the handler returns, even past the Runtime's end,
  // so it must not use objects that die with the Runtime.
  std::function<Result<std::string>(const nlohmann::ordered_json& arguments)> handler;
};

struct RunResult {
  std::string run_id;
  std::string workflow;
  std::string tenant;
  RunStatus status = RunStatus::running;  // ok | failed | cancelled | running
  std::vector<AgentResult> agents;
  double wall_ms = 0;
  std::string error;
};

// CacheStats, TenantCacheStats and CacheTreeNode: common/cache_stats.hpp.

struct Event {
  enum class Kind { run_started, agent_started, token, agent_finished, run_finished, tool_call, tool_result };
  Kind kind = Kind::run_started;
  std::string run_id;
  std::string agent_id;  // empty for run events
  // token: the new text; agent_finished: the output; tool_call: the arguments (JSON);
  // run_started: empty, but on a cluster router a run started again on another node
  // after its node went down says so (which attempt, where, the node lost).
  std::string text;
  // run_started, run_finished: the run's (RunStatus); agent_started (running),
  // agent_finished: the agent's (AgentStatus); tool_result: the call's (ToolStatus);
  // none for token and tool_call. to_string(status) is its name ("" for none).
  EventStatus status;
  CacheStats cache;      // snapshot, set on agent_finished and run_finished
  // tool_call (the agent called a tool) and tool_result (its result came back, or its
  // timeout passed): the tool's name; tool_result: milliseconds from the call, and the
  // size in bytes of what the model was given back.
  std::string tool;
  double tool_ms = 0;
  std::size_t tool_bytes = 0;
};
using EventCallback = std::function<void(const Event&)>;
const char* to_string(Event::Kind kind);
// An event as the runs SSE stream and `arbor run --json` write it (without the cache
// snapshot): {"type", "run_id", "agent_id"?, "text"?, "status"?} and for tools "tool",
// tool_call "arguments" (the JSON object), tool_result "ms" and "bytes".
nlohmann::ordered_json event_json(const Event& event);

// A KV event as GET /v1/kv_events and `arbor node` write it:
//   {"seq": 12, "type": "stored" | "removed" | "cleared", "tenant": "default",
//    "page_size": 16, "keys": ["7682412ae29cfc9d", ...],
//    stored only: "parent": "118b7bc6b40e3c70" or null, "tokens": [ids of the pages],
//    on a cluster router's stream: "node": "host:port" (KvEvent::node)}
// Keys are 16 lower-case hex digits (a JSON number would lose bits above 2^53).
nlohmann::ordered_json kv_event_json(const KvEvent& event);
// The event back from that document (a consumer of the stream, a router reading its
// nodes'). Error corrupt_data naming what is missing or malformed.
Result<KvEvent> kv_event_from_json(const nlohmann::json& document);
std::string page_key_text(std::uint64_t key);
std::optional<std::uint64_t> page_key_from_text(const std::string& text);  // nullopt unless 16 hex digits

// A run in flight. Copyable; all copies refer to the same run.
class RunHandle {
 public:
  const std::string& id() const;
  bool done() const;
  RunResult wait();           // blocks until the run ends
  RunResult snapshot() const;  // current state (status running while in flight)
  void cancel();              // stops generation, frees the run's pages; wait() then returns

  struct State;
  explicit RunHandle(std::shared_ptr<State> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<State> state_;
};

// A start_generate() call's completion callback.
using GenerationDone = std::function<void(const Result<GenerateResult>&)>;

// A generate() call in flight (the server streams through it).
class GenerationHandle {
 public:
  GenerateResult wait();            // on failure: finish_reason error, text = the error message
  Result<GenerateResult> result();  // as wait(), with failures as errors
  void cancel();

  struct State;
  explicit GenerationHandle(std::shared_ptr<State> state) : state_(std::move(state)) {}

 private:
  std::shared_ptr<State> state_;
};

// How Runtime::start runs a workflow; every field has a default (written out, so a
// designated initializer may leave out any of them: -Wmissing-field-initializers).
struct RunOptions {
  std::map<std::string, std::string> inputs = {};  // input values, as `--input NAME=VALUE` gives them
  EventCallback on_event = {};                     // lifecycle and token events, on runtime threads
  bool workflow_is_text = false;                   // the workflow argument is JSON text, not a file path
  // Replaces the workflow's own tenant (the server sets it from the API key, never from
  // the request body).
  std::optional<std::string> tenant = {};
  // The prefix document files a workflow given as text may read (a file path reads
  // relative to its own folder).
  DocumentAccess documents = DocumentAccess::local_to(".");
};

// A Runtime::subscribe_kv_events subscription. Move-only; destroying it (or reset())
// unsubscribes. It may outlive the Runtime (it then does nothing).
class KvEventSubscription {
 public:
  struct State;
  KvEventSubscription() = default;
  explicit KvEventSubscription(std::shared_ptr<State> state) : state_(std::move(state)) {}
  KvEventSubscription(KvEventSubscription&&) noexcept = default;
  KvEventSubscription& operator=(KvEventSubscription&& other) noexcept;
  KvEventSubscription(const KvEventSubscription&) = delete;
  KvEventSubscription& operator=(const KvEventSubscription&) = delete;
  ~KvEventSubscription();
  // Unsubscribes. When it returns, the callback is not running and is never called
  // again (when called from inside the callback itself: no further call after it).
  void reset();
  explicit operator bool() const { return state_ != nullptr; }

 private:
  std::shared_ptr<State> state_;
};

class Runtime {
 public:
  // Loads the model and starts the actor system. Errors: the model (not_found,
  // corrupt_data, unsupported) or the config (invalid_argument).
  static Result<std::unique_ptr<Runtime>> create(RuntimeConfig config);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Runs a workflow file to completion. invalid_argument with every diagnostic for an
  // invalid workflow; otherwise the result (status failed if an agent failed).
  Result<RunResult> run(const std::string& workflow_path,
                        const std::map<std::string, std::string>& inputs = {});
  // Starts a workflow (a file path, or JSON text with options.workflow_is_text) and
  // returns at once; errors as run() gives them.
  Result<RunHandle> start(const std::string& workflow, RunOptions options = {});

  // One-shot generation through the same cache actor. A sampling value out of its
  // range (check_sampling, common/sampling_settings.hpp) is an invalid_argument error
  // ("generate: top_p must be in 0..1 (got 1.5)"), here and from start_generate.
  Result<GenerateResult> generate(const GenerateRequest& request);
  // Starts a generation and returns at once. on_token(text piece) per token as it is
  // decoded; on_done(outcome) exactly once when it ends (finished, failed or cancelled),
  // after the handle's result is set, so a caller never needs a thread parked on
  // wait(). Both run on a runtime thread: they must not block, and on_done must not
  // destroy the Runtime.
  Result<GenerationHandle> start_generate(const GenerateRequest& request,
                                          std::function<void(const std::string&)> on_token = {},
                                          GenerationDone on_done = {});

  // Adds a tool that later runs' agents may list. invalid_argument for a bad name, a
  // name already taken (built-ins included), no handler, or parameters that are not an
  // enforceable JSON Schema of an object. A run checks its agents' "tools" against the
  // tools present when it starts (an unknown name lists the known ones).
  Result<void> add_tool(ToolDefinition tool);
  std::vector<std::string> tool_names() const;

  // The cache actor's counters. If it cannot answer (it died), the stats are empty
  // (all zero) and the failure is logged at error level ("cache_stats: ...").
  CacheStats cache_stats() const;
  // Full audit of the KV cache (PrefixCache::check_invariants): "" when every invariant
  // holds, else the first violation. O(everything); for tests and debugging.
  std::string check_invariants() const;
  std::vector<CacheTreeNode> cache_tree(const std::string& tenant, std::size_t max_nodes = 256) const;
  // The KV cache's events (common/kv_event.hpp: pages stored, removed; each event one
  // tenant's, keyed by cache/page_key.hpp) from now on; nothing earlier is replayed.
  // Contract:
  //   - Thread: the callback runs on the cache actor's thread, inside the step that
  //     caused the event: it must be short and never block (queue the event and
  //     return; the server's /v1/kv_events does so with a bounded queue), and must not
  //     call Runtime methods that ask the cache actor (cache_stats, cache_tree,
  //     check_invariants, generate, wait()): they would deadlock.
  //   - Order: events arrive in the order the cache made them, one at a time (never
  //     concurrently), with KvEvent::sequence increasing by exactly 1 per event of
  //     this Runtime (the first one a subscriber sees may have any number).
  //   - Locks: no lock of the Runtime is held while the callback runs; it may create
  //     or reset subscriptions, its own included.
  // Every subscriber gets every tenant's events: show them only to whoever may see
  // every tenant (the server: admin keys).
  KvEventSubscription subscribe_kv_events(std::function<void(const KvEvent&)> callback);
  const RuntimeConfig& config() const;
  // The device the engine runs on ("cpu" or "cuda", whatever config().device asked),
  // and a line for people saying what it is and why it was chosen.
  std::string device() const;
  std::string device_info() const;
  std::size_t kv_pool_bytes() const;  // the KV page pool's size (see kv_memory_mb)
  std::string model_name() const;
  std::size_t context_length() const;

  struct Impl;

 private:
  friend struct RuntimeTestAccess;  // tests only: fault injection (tests/runtime/fault_injection.hpp)
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The documents `arbor run --json` prints and the server returns.
std::string to_json(const RunResult& result);
std::string to_json(const CacheStats& stats);
std::string to_json(const GenerateResult& result);

}  // namespace arbor

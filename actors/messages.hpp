// Every message the actors exchange: one plain struct per message, each with a CAF
// 0.17 inspector (CAF 0.17 manual, "Type Inspection") and registered in
// actors/config.hpp, so each may cross a node boundary. Errors travel as values inside
// the replies (ok / error_code / error), never as exceptions. Who takes which message,
// and what it answers, is declared as typed actor interfaces in actors/interfaces.hpp.
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "common/cache_stats.hpp"
#include "common/sampling_settings.hpp"
#include "common/status.hpp"
#include "common/token_usage.hpp"

namespace arbor {

// CAF's views of common/sampling_settings.hpp, common/token_usage.hpp and
// common/cache_stats.hpp (found by ADL, in the types' namespace).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SamplingSettings& x) {
  return f(caf::meta::type_name("SamplingSettings"), x.max_tokens, x.temperature, x.top_p, x.top_k, x.seed,
           x.stop);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenUsage& x) {
  return f(caf::meta::type_name("TokenUsage"), x.prompt_tokens, x.cached_tokens, x.computed_tokens, x.generated_tokens);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TenantCacheStats& x) {
  return f(caf::meta::type_name("TenantCacheStats"), x.lookups, x.hit_tokens, x.miss_tokens, x.inserted_tokens,
           x.evicted_pages, x.used_pages, x.quota_pages, x.num_sequences);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CacheTreeNode& x) {
  return f(caf::meta::type_name("CacheTreeNode"), x.id, x.parent_id, x.num_tokens, x.depth_tokens, x.hit_count,
           x.lock_count, x.shared_namespace, x.snippet, x.first_tokens, x.node);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CacheStats& x) {
  return f(caf::meta::type_name("CacheStats"), static_cast<TokenUsage&>(x), x.warmup_tokens, x.hit_ratio, x.pages_total,
           x.pages_used, x.pages_free, x.pages_locked, x.pages_cached_idle, x.pages_pinned, x.pins, x.evictions,
           x.live_sequences, x.queued_requests, x.batched_steps, x.step_seconds, x.forward_seconds,
           x.graph_steps_replayed, x.graph_steps_captured, x.tenants);
}

}  // namespace arbor

namespace arbor::actors {

using step_atom = caf::atom_constant<caf::atom("step")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using audit_atom = caf::atom_constant<caf::atom("audit")>;
using timeout_atom = caf::atom_constant<caf::atom("timeout")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
using start_atom = caf::atom_constant<caf::atom("start")>;
using tool_atom = caf::atom_constant<caf::atom("tool")>;
using expire_atom = caf::atom_constant<caf::atom("expire")>;

struct TokenEvent {
  std::uint64_t request_id = 0;
  std::string tag;
  std::int32_t token = -1;
  std::string text;  // bytes now safe to show (never half a UTF-8 char or stop string)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenEvent& x) {
  return f(caf::meta::type_name("TokenEvent"), x.request_id, x.tag, x.token, x.text);
}

// Who receives a request's token pieces (SeqRequest::listener): a typed handle, so the
// cache actor can only stream to an actor that takes TokenEvent.
using TokenListener = caf::typed_actor<caf::reacts_to<TokenEvent>>;

// One sequence: prefill `prompt` in `tenant`'s namespace, then generate.
struct SeqRequest {
  std::uint64_t request_id = 0;  // unique per runtime (next_request_id()); cancel uses it
  std::string tenant;
  std::string run_id;  // "" outside a workflow run; CancelRun cancels by it
  std::string tag;     // echoed in TokenEvent (the agent id)
  std::vector<std::int32_t> prompt;
  SamplingSettings sampling;  // max_tokens 0 = prefill only (cache warming)
  // Constrained decoding: a JSON Schema (text; its key order is the generation order)
  // that the output must follow; "" = free text. The BatchEngine compiles each distinct
  // schema once (ConstraintCache) and masks every sampled token with it; generation
  // stops when the document is complete (sampling.stop does not apply). A schema it
  // cannot enforce fails the request at submit (invalid_argument naming the keyword's
  // JSON pointer).
  std::string json_schema;
  TokenListener listener;  // receives TokenEvent per decoded piece; null = no streaming
  // Tool pins (actors/tool_loop.hpp): pin_ttl_ms > 0 keeps the history this request
  // computed (prompt + generated, full pages) pinned for that long after it finishes
  // ("stop" or "length"), so eviction skips it while a tool runs; SeqResult::pin_id
  // names the pin. release_pin: the pin this request continues from, released once the
  // request is admitted (its own lock holds the path then) or ends without admission.
  std::int32_t pin_ttl_ms = 0;
  std::uint64_t release_pin = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SeqRequest& x) {
  return f(caf::meta::type_name("SeqRequest"), x.request_id, x.tenant, x.run_id, x.tag, x.prompt,
           x.sampling, x.json_schema, x.listener, x.pin_ttl_ms, x.release_pin);
}

// Its TokenUsage: prompt = cached + computed of this request; generated_tokens.
struct SeqResult : TokenUsage {
  std::uint64_t request_id = 0;
  bool ok = true;
  std::int32_t error_code = 0;  // arbor::ErrorCode when !ok
  std::string error;
  std::vector<std::int32_t> tokens;  // generated ids (no end-of-generation id)
  std::string text;                  // decoded, cut at a stop string
  double ttft_ms = 0, prefill_ms = 0, decode_ms = 0, queue_ms = 0;
  FinishReason finish_reason = FinishReason::stop;  // stop | length | cancelled | prefill | error (common/status.hpp)
  // With json_schema: the document (== text) once it is complete, parsed and
  // validated against the schema; "" when generation stopped before (finish length,
  // cancelled).
  std::string json;
  std::uint64_t pin_id = 0;  // with SeqRequest::pin_ttl_ms: the pin holding its history; 0 = none
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SeqResult& x) {
  return f(caf::meta::type_name("SeqResult"), x.request_id, x.ok, x.error_code, x.error, x.tokens, x.text,
           static_cast<TokenUsage&>(x), x.ttft_ms, x.prefill_ms, x.decode_ms, x.queue_ms, x.finish_reason, x.json,
           x.pin_id);
}

struct CancelRequest {
  std::uint64_t request_id = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CancelRequest& x) {
  return f(caf::meta::type_name("CancelRequest"), x.request_id);
}

// Cancels every request and pin of a run, and refuses later ones (a run is over).
struct CancelRun {
  std::string run_id;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CancelRun& x) {
  return f(caf::meta::type_name("CancelRun"), x.run_id);
}

// Pins the cached path of `tokens` (and, with the priority policy, raises its priority)
// until UnpinRequest or CancelRun of `run_id`.
struct PinRequest {
  std::string tenant;
  std::string run_id;
  std::vector<std::int32_t> tokens;
  std::int32_t priority = 1;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PinRequest& x) {
  return f(caf::meta::type_name("PinRequest"), x.tenant, x.run_id, x.tokens, x.priority);
}

struct PinReply {
  bool ok = false;
  std::string error;
  std::uint64_t pin_id = 0;
  std::uint64_t num_tokens = 0;  // tokens covered by the pin / priority
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PinReply& x) {
  return f(caf::meta::type_name("PinReply"), x.ok, x.error, x.pin_id, x.num_tokens);
}

struct UnpinRequest {
  std::uint64_t pin_id = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, UnpinRequest& x) {
  return f(caf::meta::type_name("UnpinRequest"), x.pin_id);
}

struct PriorityRequest {
  std::string tenant;
  std::vector<std::int32_t> tokens;
  std::int32_t priority = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PriorityRequest& x) {
  return f(caf::meta::type_name("PriorityRequest"), x.tenant, x.tokens, x.priority);
}

// The cache actor's figures at one instant: the public CacheStats (what
// Runtime::cache_stats returns) plus what only tests and benchmarks read. The full
// invariant audit is a message of its own, (get_atom, audit_atom), not part of this.
struct CacheSnapshot : CacheStats {
  std::uint64_t num_steps = 0;
  std::uint64_t schemas_compiled = 0;  // distinct JSON Schemas compiled (ConstraintCache)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CacheSnapshot& x) {
  return f(caf::meta::type_name("CacheSnapshot"), static_cast<CacheStats&>(x), x.num_steps, x.schemas_compiled);
}

struct TreeRequest {
  std::string tenant;
  std::uint64_t max_nodes = 256;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TreeRequest& x) {
  return f(caf::meta::type_name("TreeRequest"), x.tenant, x.max_nodes);
}

struct TreeReply {
  bool ok = false;
  std::string error;
  std::vector<CacheTreeNode> nodes;  // snippet not set (the runtime decodes first_tokens)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TreeReply& x) {
  return f(caf::meta::type_name("TreeReply"), x.ok, x.error, x.nodes);
}

// One tool call an agent made (actors/tool_loop.hpp), in the order made.
struct ToolCallRecord {
  std::string name;
  std::string arguments;  // the generated arguments (compact JSON)
  ToolStatus status = ToolStatus::ok;  // ok | error (the handler failed, threw, or returned invalid UTF-8) | timeout
  std::string result;     // what the model was given back (an error message when not "ok")
  double ms = 0;          // call sent -> result (or timeout)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ToolCallRecord& x) {
  return f(caf::meta::type_name("ToolCallRecord"), x.name, x.arguments, x.status, x.result, x.ms);
}

// An agent called a tool (result = false), or the call's result came back (true): sent
// by the agent's ToolLoop to its run actor, which makes it a tool_call / tool_result event.
struct ToolEvent {
  std::string agent_id;
  std::string tool;
  bool result = false;
  std::string arguments;  // the call: its arguments (compact JSON)
  ToolStatus status = ToolStatus::ok;  // the result: ok | error | timeout (not read for the call)
  double ms = 0;
  std::uint64_t bytes = 0;  // the result's size as the model gets it
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ToolEvent& x) {
  return f(caf::meta::type_name("ToolEvent"), x.agent_id, x.tool, x.result, x.arguments, x.status, x.ms, x.bytes);
}

// A tool handler's answer, sent by actors/tool_runner.hpp's thread to the agent.
struct ToolDone {
  std::uint64_t call_id = 0;
  bool ok = false;
  std::string output;  // the result, or the error message
  double ms = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ToolDone& x) {
  return f(caf::meta::type_name("ToolDone"), x.call_id, x.ok, x.output, x.ms);
}

// What an agent reports when it ends (to its parent and to the run). Its TokenUsage sums
// the agent's turns (prompt = cached + computed); warmup_tokens are the prefix tokens it
// prefilled for its children (prefill-only, not a turn).
struct AgentReport : TokenUsage {
  std::string id;
  std::string parent;
  AgentStatus status = AgentStatus::ok;  // ok | failed | timeout | cancelled
  std::string output;
  std::uint64_t warmup_tokens = 0;
  std::int32_t attempts = 0;
  double ttft_ms = 0, duration_ms = 0;
  std::string error;
  std::string json;  // with an output_schema: the output, a document valid against it
  // Tools: calls made (all attempts), their time, and the prompt tokens prefilled
  // again after tool results beyond the new messages (the history's partial last
  // page; KV pages are shared only when full).
  std::int32_t tool_calls = 0;
  double tool_ms = 0;
  std::uint64_t tool_recomputed_tokens = 0;
  std::vector<ToolCallRecord> tool_trace;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, AgentReport& x) {
  return f(caf::meta::type_name("AgentReport"), x.id, x.parent, x.status, x.output, static_cast<TokenUsage&>(x),
           x.warmup_tokens, x.attempts, x.ttft_ms, x.duration_ms, x.error, x.json, x.tool_calls, x.tool_ms,
           x.tool_recomputed_tokens, x.tool_trace);
}

struct AgentStarted {
  std::string id;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, AgentStarted& x) {
  return f(caf::meta::type_name("AgentStarted"), x.id);
}

// Answered once every listed agent has finished (ok = all succeeded).
struct DepsRequest {
  std::vector<std::string> ids;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DepsRequest& x) {
  return f(caf::meta::type_name("DepsRequest"), x.ids);
}

struct DepsReply {
  bool ok = false;
  std::string error;
  std::vector<std::string> ids;  // parallel to outputs
  std::vector<std::string> outputs;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DepsReply& x) {
  return f(caf::meta::type_name("DepsReply"), x.ok, x.error, x.ids, x.outputs);
}

// A fresh request id, unique within the process.
std::uint64_t next_request_id();

}  // namespace arbor::actors

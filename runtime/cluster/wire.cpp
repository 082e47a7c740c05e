#include "runtime/cluster/wire.hpp"

#include <optional>

#include <nlohmann/json.hpp>

namespace arbor::cluster {
namespace {

using Json = nlohmann::json;

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Result<Json> parse(const std::string& text, const char* what) {
  Json j = Json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return fail(ErrorCode::corrupt_data, std::string("cluster wire: a ") + what +
                                             " that is not a JSON object came from a peer; run the same Arbor "
                                             "version on the router and its nodes");
  return j;
}

// Reads a value with nlohmann's conversions, turning its exceptions into an error.
template <class F>
auto guarded(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    return fail(ErrorCode::corrupt_data, std::string("cluster wire: malformed ") + what + " from a peer: " + e.what() +
                                             "; run the same Arbor version on the router and its nodes");
  }
}

Json calls_json(const std::vector<ChatToolCall>& calls) {
  Json out = Json::array();
  for (const auto& c : calls) out.push_back({{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
  return out;
}

std::vector<ChatToolCall> calls_from(const Json& j) {
  std::vector<ChatToolCall> out;
  for (const auto& c : j) out.push_back({c.at("id"), c.at("name"), c.at("arguments")});
  return out;
}

// An outcome's error: {"error": {"code", "message"}}, the code as ErrorCode's number.
std::string error_to_wire(const Error& e) {
  return dump({{"error", {{"code", static_cast<int>(e.code)}, {"message", e.message}}}});
}

// The error of an outcome that has one, read back (a code this build does not know
// becomes internal, its message kept); nullopt when the outcome succeeded.
std::optional<Error> error_from(const Json& j) {
  if (!j.contains("error")) return std::nullopt;
  const auto& e = j.at("error");
  const int code = e.at("code");
  const auto known = code >= 0 && code <= static_cast<int>(ErrorCode::internal);
  return Error{known ? static_cast<ErrorCode>(code) : ErrorCode::internal, e.at("message").get<std::string>()};
}

}  // namespace

std::string to_wire(const GenerateRequest& r) {
  Json messages = Json::array();
  for (const auto& m : r.messages)
    messages.push_back({{"role", m.role}, {"content", m.content}, {"tool_calls", calls_json(m.tool_calls)},
                        {"tool_call_id", m.tool_call_id}});
  Json tools = Json::array();
  for (const auto& t : r.tools)
    tools.push_back({{"name", t.name}, {"description", t.description}, {"parameters", t.parameters}});
  const auto& s = r.sampling;
  Json j = {{"tenant", r.tenant},
            {"messages", std::move(messages)},
            {"sampling",
             {{"max_tokens", s.max_tokens}, {"temperature", s.temperature}, {"top_p", s.top_p},
              {"top_k", s.top_k}, {"seed", s.seed}, {"stop", s.stop}}},
            {"tools", std::move(tools)},
            {"tool_choice", static_cast<int>(r.tool_choice)},
            {"tool_choice_name", r.tool_choice_name}};
  if (r.raw_prompt) j["raw_prompt"] = *r.raw_prompt;
  if (r.json_schema) j["json_schema"] = *r.json_schema;
  return dump(j);
}

Result<GenerateRequest> request_from_wire(const std::string& text) {
  auto j = parse(text, "request");
  if (!j) return std::unexpected(j.error());
  return guarded("request", [&]() -> Result<GenerateRequest> {
    GenerateRequest r;
    r.tenant = j->at("tenant");
    for (const auto& m : j->at("messages"))
      r.messages.push_back({m.at("role"), m.at("content"), calls_from(m.at("tool_calls")), m.at("tool_call_id")});
    if (j->contains("raw_prompt")) r.raw_prompt = j->at("raw_prompt").get<std::string>();
    if (j->contains("json_schema")) r.json_schema = j->at("json_schema").get<std::string>();
    const auto& s = j->at("sampling");
    r.sampling.max_tokens = s.at("max_tokens");
    r.sampling.temperature = s.at("temperature");
    r.sampling.top_p = s.at("top_p");
    r.sampling.top_k = s.at("top_k");
    r.sampling.seed = s.at("seed");
    r.sampling.stop = s.at("stop").get<std::vector<std::string>>();
    for (const auto& t : j->at("tools")) r.tools.push_back({t.at("name"), t.at("description"), t.at("parameters")});
    const int choice = j->at("tool_choice");
    if (choice < 0 || choice > static_cast<int>(ToolChoice::function))
      return fail(ErrorCode::corrupt_data, "cluster wire: unknown tool_choice " + std::to_string(choice));
    r.tool_choice = static_cast<ToolChoice>(choice);
    r.tool_choice_name = j->at("tool_choice_name");
    return r;
  });
}

std::string to_wire(const Result<GenerateResult>& outcome) {
  if (!outcome) return error_to_wire(outcome.error());
  const auto& r = *outcome;
  Json j = {{"text", r.text},
            {"tokens", r.tokens},
            {"ttft_ms", r.ttft_ms},
            {"prefill_ms", r.prefill_ms},
            {"decode_ms", r.decode_ms},
            {"finish_reason", r.finish_reason},
            {"tool_calls", calls_json(r.tool_calls)}};
  to_json(j, r.usage());
  if (r.json) j["json"] = r.json->dump();  // text: keeps the key order of the ordered_json
  return dump({{"result", std::move(j)}});
}

Result<GenerateResult> outcome_from_wire(const std::string& text) {
  auto j = parse(text, "generation outcome");
  if (!j) return std::unexpected(j.error());
  return guarded("generation outcome", [&]() -> Result<GenerateResult> {
    if (auto error = error_from(*j)) return std::unexpected(std::move(*error));
    const auto& x = j->at("result");
    GenerateResult r;
    r.text = x.at("text");
    r.tokens = x.at("tokens").get<std::vector<std::int32_t>>();
    from_json(x, r.usage());
    r.ttft_ms = x.at("ttft_ms");
    r.prefill_ms = x.at("prefill_ms");
    r.decode_ms = x.at("decode_ms");
    auto reason = parse_finish_reason(x.at("finish_reason").get<std::string>());
    if (!reason)
      return fail(ErrorCode::corrupt_data, "cluster wire: generation outcome from a peer: finish_reason " +
                                               reason.error().message + "; run the same Arbor version on the router "
                                               "and its nodes");
    r.finish_reason = *reason;
    r.tool_calls = calls_from(x.at("tool_calls"));
    if (x.contains("json")) r.json = nlohmann::ordered_json::parse(x.at("json").get<std::string>());
    return r;
  });
}

std::string to_wire(const NodeInfo& i) {
  return dump({{"model", i.model}, {"context_length", i.context_length}, {"page_size", i.page_size},
               {"pages_total", i.pages_total}});
}

Result<NodeInfo> info_from_wire(const std::string& text) {
  auto j = parse(text, "node info");
  if (!j) return std::unexpected(j.error());
  return guarded("node info", [&]() -> Result<NodeInfo> {
    return NodeInfo{j->at("model"), j->at("context_length"), j->at("page_size"), j->at("pages_total")};
  });
}

std::string to_wire(const NodeStats& s) {
  return dump({{"cache", Json(s.cache)}, {"inflight", s.inflight}, {"runs", s.runs}});
}

Result<NodeStats> stats_from_wire(const std::string& text) {
  auto j = parse(text, "node stats");
  if (!j) return std::unexpected(j.error());
  return guarded("node stats", [&]() -> Result<NodeStats> {
    return NodeStats{j->at("cache").get<CacheStats>(), j->at("inflight"), j->value("runs", std::size_t(0))};
  });
}

std::string tree_to_wire(const std::vector<CacheTreeNode>& nodes) { return dump({{"nodes", Json(nodes)}}); }

Result<std::vector<CacheTreeNode>> tree_from_wire(const std::string& text) {
  auto j = parse(text, "cache tree");
  if (!j) return std::unexpected(j.error());
  return guarded("cache tree", [&]() -> Result<std::vector<CacheTreeNode>> {
    return j->at("nodes").get<std::vector<CacheTreeNode>>();
  });
}

std::string to_wire(const RunRequest& r) {
  return dump({{"workflow", r.workflow}, {"inputs", r.inputs}, {"tenant", r.tenant}, {"documents", r.documents}});
}

Result<RunRequest> run_request_from_wire(const std::string& text) {
  auto j = parse(text, "run request");
  if (!j) return std::unexpected(j.error());
  return guarded("run request", [&]() -> Result<RunRequest> {
    return RunRequest{j->at("workflow"), j->at("inputs").get<std::map<std::string, std::string>>(), j->at("tenant"),
                      j->at("documents").get<std::map<std::string, std::string>>()};
  });
}

namespace {

// A status read back as the alternative `index` of EventStatus names it.
Result<EventStatus> status_from(std::size_t index, const std::string& name) {
  auto bad = [&](const Error& e) -> Result<EventStatus> {
    return fail(ErrorCode::corrupt_data,
                "cluster wire: event status " + e.message + "; run the same Arbor version on the router and its nodes");
  };
  switch (index) {
    case 0: return EventStatus{};
    case 1: {
      auto v = parse_agent_status(name);
      return v ? Result<EventStatus>(EventStatus{*v}) : bad(v.error());
    }
    case 2: {
      auto v = parse_run_status(name);
      return v ? Result<EventStatus>(EventStatus{*v}) : bad(v.error());
    }
    case 3: {
      auto v = parse_tool_status(name);
      return v ? Result<EventStatus>(EventStatus{*v}) : bad(v.error());
    }
    default: return fail(ErrorCode::corrupt_data, "cluster wire: unknown event status kind " + std::to_string(index));
  }
}

Json event_json_full(const Event& e) {
  return {{"kind", static_cast<int>(e.kind)},
          {"run_id", e.run_id},
          {"agent_id", e.agent_id},
          {"text", e.text},
          {"status_kind", e.status.index()},
          {"status", to_string(e.status)},
          {"cache", Json(e.cache)},
          {"tool", e.tool},
          {"tool_ms", e.tool_ms},
          {"tool_bytes", e.tool_bytes}};
}

Result<Event> event_from(const Json& j) {
  Event e;
  const int kind = j.at("kind");
  if (kind < 0 || kind > static_cast<int>(Event::Kind::tool_result))
    return fail(ErrorCode::corrupt_data, "cluster wire: unknown event kind " + std::to_string(kind));
  e.kind = static_cast<Event::Kind>(kind);
  e.run_id = j.at("run_id");
  e.agent_id = j.at("agent_id");
  e.text = j.at("text");
  auto status = status_from(j.at("status_kind").get<std::size_t>(), j.at("status").get<std::string>());
  if (!status) return std::unexpected(status.error());
  e.status = *status;
  e.cache = j.at("cache").get<CacheStats>();
  e.tool = j.at("tool");
  e.tool_ms = j.at("tool_ms");
  e.tool_bytes = j.at("tool_bytes");
  return e;
}

Json run_json_full(const RunResult& r) {
  Json agents = Json::array();
  for (const auto& a : r.agents) {
    Json trace = Json::array();
    for (const auto& c : a.tool_trace)
      trace.push_back(
          {{"name", c.name}, {"arguments", c.arguments}, {"status", c.status}, {"result", c.result}, {"ms", c.ms}});
    Json x = {{"id", a.id},
              {"parent", a.parent},
              {"status", a.status},
              {"output", a.output},
              {"attempts", a.attempts},
              {"ttft_ms", a.ttft_ms},
              {"duration_ms", a.duration_ms},
              {"error", a.error},
              {"warmup_tokens", a.warmup_tokens},
              {"tool_calls", a.tool_calls},
              {"tool_ms", a.tool_ms},
              {"tool_recomputed_tokens", a.tool_recomputed_tokens},
              {"tool_trace", std::move(trace)}};
    to_json(x, a.usage());
    if (a.json) x["json"] = a.json->dump();  // text: keeps the key order of the ordered_json
    agents.push_back(std::move(x));
  }
  return {{"run_id", r.run_id},          {"workflow", r.workflow}, {"tenant", r.tenant}, {"status", r.status},
          {"agents", std::move(agents)}, {"wall_ms", r.wall_ms},   {"error", r.error}};
}

Result<RunResult> run_from(const Json& j) {
  auto bad = [](const Error& e) -> Result<RunResult> {
    return fail(ErrorCode::corrupt_data,
                "cluster wire: run result: " + e.message + "; run the same Arbor version on the router and its nodes");
  };
  RunResult r;
  r.run_id = j.at("run_id");
  r.workflow = j.at("workflow");
  r.tenant = j.at("tenant");
  auto status = parse_run_status(j.at("status").get<std::string>());
  if (!status) return bad(status.error());
  r.status = *status;
  for (const auto& x : j.at("agents")) {
    AgentResult a;
    a.id = x.at("id");
    a.parent = x.at("parent");
    auto s = parse_agent_status(x.at("status").get<std::string>());
    if (!s) return bad(s.error());
    a.status = *s;
    a.output = x.at("output");
    from_json(x, a.usage());
    a.attempts = x.at("attempts");
    a.ttft_ms = x.at("ttft_ms");
    a.duration_ms = x.at("duration_ms");
    a.error = x.at("error");
    a.warmup_tokens = x.at("warmup_tokens");
    a.tool_calls = x.at("tool_calls");
    a.tool_ms = x.at("tool_ms");
    a.tool_recomputed_tokens = x.at("tool_recomputed_tokens");
    for (const auto& c : x.at("tool_trace")) {
      auto t = parse_tool_status(c.at("status").get<std::string>());
      if (!t) return bad(t.error());
      a.tool_trace.push_back({c.at("name"), c.at("arguments"), *t, c.at("result"), c.at("ms")});
    }
    if (x.contains("json")) a.json = nlohmann::ordered_json::parse(x.at("json").get<std::string>());
    r.agents.push_back(std::move(a));
  }
  r.wall_ms = j.at("wall_ms");
  r.error = j.at("error");
  return r;
}

}  // namespace

std::string event_to_wire(const Event& event) { return dump(event_json_full(event)); }

Result<Event> event_from_wire(const std::string& text) {
  auto j = parse(text, "run event");
  if (!j) return std::unexpected(j.error());
  return guarded("run event", [&]() -> Result<Event> { return event_from(*j); });
}

std::string to_wire(const Result<RunOutcome>& outcome) {
  if (!outcome) return error_to_wire(outcome.error());
  return dump({{"result", run_json_full(outcome->result)}, {"event", event_json_full(outcome->finished)}});
}

Result<RunOutcome> run_outcome_from_wire(const std::string& text) {
  auto j = parse(text, "run outcome");
  if (!j) return std::unexpected(j.error());
  return guarded("run outcome", [&]() -> Result<RunOutcome> {
    if (auto error = error_from(*j)) return std::unexpected(std::move(*error));
    auto result = run_from(j->at("result"));
    if (!result) return std::unexpected(result.error());
    auto event = event_from(j->at("event"));
    if (!event) return std::unexpected(event.error());
    return RunOutcome{std::move(*result), std::move(*event)};
  });
}

}  // namespace arbor::cluster

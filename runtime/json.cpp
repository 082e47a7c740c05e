// The JSON documents and wire names of runtime.hpp (`arbor run --json`, the server's
// responses, event names). No actor code here: the server's fuzz targets link this file.
#include <charconv>
#include <cstdio>
#include <optional>

#include <nlohmann/json.hpp>

#include "arbor/runtime.hpp"

namespace arbor {
namespace {

// Model text is valid UTF-8 where it is made (model::StopChecker); should anything else
// slip through, it is replaced with U+FFFD here rather than thrown as type_error 316.
std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// A structured output inside these (key-sorted) documents; its own key order is lost.
nlohmann::json document(const nlohmann::ordered_json& value) { return nlohmann::json::parse(value.dump()); }

}  // namespace

const char* to_string(Event::Kind kind) {
  switch (kind) {
    case Event::Kind::run_started: return "run_started";
    case Event::Kind::agent_started: return "agent_started";
    case Event::Kind::token: return "token";
    case Event::Kind::agent_finished: return "agent_finished";
    case Event::Kind::run_finished: return "run_finished";
    case Event::Kind::tool_call: return "tool_call";
    case Event::Kind::tool_result: return "tool_result";
  }
  return "unknown";
}

nlohmann::ordered_json event_json(const Event& e) {
  nlohmann::ordered_json j;
  j["type"] = to_string(e.kind);
  j["run_id"] = e.run_id;
  if (!e.agent_id.empty()) j["agent_id"] = e.agent_id;
  if (e.kind == Event::Kind::tool_call || e.kind == Event::Kind::tool_result) j["tool"] = e.tool;
  if (e.kind == Event::Kind::tool_call) {
    // Generated under the tool's schema, so a JSON document; kept as text otherwise.
    auto args = nlohmann::ordered_json::parse(e.text, nullptr, false);
    j["arguments"] = args.is_discarded() ? nlohmann::ordered_json(e.text) : args;
  } else if (e.kind == Event::Kind::token || !e.text.empty()) {
    j["text"] = e.text;
  }
  if (!std::holds_alternative<std::monostate>(e.status)) j["status"] = to_string(e.status);
  if (e.kind == Event::Kind::tool_result) {
    j["ms"] = e.tool_ms;
    j["bytes"] = e.tool_bytes;
  }
  return j;
}

std::string page_key_text(std::uint64_t key) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(key));
  return text;
}

std::optional<std::uint64_t> page_key_from_text(const std::string& text) {
  if (text.size() != 16) return std::nullopt;
  std::uint64_t key = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), key, 16);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return key;
}

nlohmann::ordered_json kv_event_json(const KvEvent& e) {
  nlohmann::ordered_json j;
  j["seq"] = e.sequence;
  j["type"] = to_string(e.kind);
  j["tenant"] = e.tenant;
  j["page_size"] = e.page_size;
  j["keys"] = nlohmann::ordered_json::array();
  for (auto k : e.keys) j["keys"].push_back(page_key_text(k));
  if (e.kind == KvEvent::Kind::stored) {
    j["parent"] = e.parent ? nlohmann::ordered_json(page_key_text(*e.parent)) : nlohmann::ordered_json(nullptr);
    j["tokens"] = e.tokens;
  }
  return j;
}

std::string to_json(const RunResult& r) {
  nlohmann::json agents = nlohmann::json::array();
  TokenUsage total;
  std::size_t warmup = 0;
  for (const auto& a : r.agents) {
    total += a.usage();
    warmup += a.warmup_tokens;
    nlohmann::json j = a.usage();
    j.update({{"id", a.id}, {"parent", a.parent}, {"status", a.status}, {"output", a.output},
              {"warmup_tokens", a.warmup_tokens}, {"ttft_ms", a.ttft_ms}, {"duration_ms", a.duration_ms}});
    if (a.status != AgentStatus::ok && !a.error.empty()) j["error"] = a.error;
    if (a.json) j["json"] = document(*a.json);
    if (a.tool_calls > 0) {
      j["tool_calls"] = a.tool_calls;
      j["tool_ms"] = a.tool_ms;
      j["tool_recomputed_tokens"] = a.tool_recomputed_tokens;
      nlohmann::json trace = nlohmann::json::array();
      for (const auto& c : a.tool_trace)
        trace.push_back({{"name", c.name}, {"arguments", c.arguments}, {"status", c.status}, {"result", c.result},
                         {"ms", c.ms}});
      j["tool_trace"] = std::move(trace);
    }
    agents.push_back(std::move(j));
  }
  nlohmann::json j = {{"run_id", r.run_id},   {"workflow", r.workflow}, {"tenant", r.tenant},
                      {"status", r.status},   {"agents", agents},       {"wall_ms", r.wall_ms}};
  // The agents' sums: prompt = cached + computed; warm-ups apart (see AgentResult).
  j["totals"] = total;
  j["totals"]["warmup_tokens"] = warmup;
  if (!r.error.empty()) j["error"] = r.error;
  return dump(j);
}

// The field names and order are common/cache_stats.hpp's (NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE).
std::string to_json(const CacheStats& s) { return dump(nlohmann::json(s)); }

std::string to_json(const GenerateResult& r) {
  nlohmann::json j = r.usage();
  j.update({{"text", r.text}, {"tokens", r.tokens}, {"ttft_ms", r.ttft_ms}, {"prefill_ms", r.prefill_ms},
            {"decode_ms", r.decode_ms}, {"finish_reason", r.finish_reason}});
  if (r.json) j["json"] = document(*r.json);
  if (!r.tool_calls.empty()) {
    j["tool_calls"] = nlohmann::json::array();
    for (const auto& c : r.tool_calls)
      j["tool_calls"].push_back({{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
  }
  return dump(j);
}

}  // namespace arbor

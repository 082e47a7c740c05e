// The JSON documents and wire names of runtime.hpp (`arbor run --json`, the server's
// responses, event names). No actor code here: the server's fuzz targets link this file.
#include <algorithm>
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
  if (!e.node.empty()) j["node"] = e.node;
  return j;
}

Result<KvEvent> kv_event_from_json(const nlohmann::json& j) {
  auto bad = [](const std::string& what) -> Result<KvEvent> {
    return fail(ErrorCode::corrupt_data, "KV event: " + what + " (kv_event_json in arbor/runtime.hpp is the format)");
  };
  if (!j.is_object()) return bad("not a JSON object");
  auto text = [&](const char* key) -> std::optional<std::string> {
    return j.contains(key) && j[key].is_string() ? std::optional(j[key].get<std::string>()) : std::nullopt;
  };
  auto count = [&](const char* key) -> std::optional<std::uint64_t> {
    return j.contains(key) && j[key].is_number_unsigned() ? std::optional(j[key].get<std::uint64_t>()) : std::nullopt;
  };
  KvEvent e;
  const auto type = text("type");
  const auto kinds = {KvEvent::Kind::stored, KvEvent::Kind::removed, KvEvent::Kind::cleared};
  const auto kind = std::find_if(kinds.begin(), kinds.end(), [&](KvEvent::Kind k) { return type == to_string(k); });
  if (kind == kinds.end()) return bad("\"type\" is not stored, removed or cleared");
  e.kind = *kind;
  const auto tenant = text("tenant");
  const auto seq = count("seq");
  const auto page_size = count("page_size");
  if (!tenant || !seq || !page_size) return bad("\"tenant\", \"seq\" and \"page_size\" are required");
  e.tenant = *tenant;
  e.sequence = *seq;
  e.page_size = std::size_t(*page_size);
  if (!j.contains("keys") || !j["keys"].is_array()) return bad("\"keys\" is not an array");
  for (const auto& k : j["keys"]) {
    auto key = k.is_string() ? page_key_from_text(k.get<std::string>()) : std::nullopt;
    if (!key) return bad("a key is not 16 hex digits");
    e.keys.push_back(*key);
  }
  if (e.kind == KvEvent::Kind::stored) {
    if (!j.contains("parent") || !j.contains("tokens") || !j["tokens"].is_array())
      return bad("a stored event needs \"parent\" and \"tokens\"");
    if (!j["parent"].is_null()) {
      auto parent = j["parent"].is_string() ? page_key_from_text(j["parent"].get<std::string>()) : std::nullopt;
      if (!parent) return bad("\"parent\" is neither null nor 16 hex digits");
      e.parent = *parent;
    }
    for (const auto& t : j["tokens"]) {
      if (!t.is_number_integer()) return bad("a token id is not an integer");
      e.tokens.push_back(t.get<std::int32_t>());
    }
    if (e.tokens.size() != e.keys.size() * e.page_size) return bad("\"tokens\" is not keys x page_size ids");
  }
  if (auto node = text("node")) e.node = *node;
  return e;
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

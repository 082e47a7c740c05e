#include "runtime/server/openai_api.hpp"

#include <climits>
#include <cmath>
#include <limits>

#include "common/sampling_settings.hpp"
#include "runtime/server/chat_tools.hpp"
#include "runtime/server/response_format.hpp"

namespace arbor::server {
namespace {

using nlohmann::json;
using Fail = std::unexpected<ApiError>;

std::expected<std::string, ApiError> message_content(const json& content, const std::string& at) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_array()) {  // [{"type": "text", "text": "..."}]
    std::string text;
    for (std::size_t i = 0; i < content.size(); ++i) {
      const json& part = content[i];
      const std::string p = at + "/" + std::to_string(i);
      if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
          !part["text"].is_string())
        return Fail(invalid_param(p, "must be a text part {\"type\": \"text\", \"text\": \"...\"} (only text is supported)"));
      text += part["text"].get<std::string>();
    }
    return text;
  }
  return Fail(invalid_param(at, "must be a string or an array of text parts"));
}

// One message {role, content}; an assistant's may carry tool_calls (content then may be
// null), a tool's a tool_call_id.
std::expected<ChatMessage, ApiError> parse_message(const json& m, const std::string& at) {
  if (!m.is_object()) return Fail(invalid_param(at, "must be an object {role, content}"));
  if (!m.contains("role") || !m["role"].is_string())
    return Fail(invalid_param(at + "/role", "is required: \"system\", \"user\", \"assistant\" or \"tool\""));
  ChatMessage out;
  out.role = m["role"].get<std::string>();
  if (out.role == "developer") out.role = "system";
  if (out.role != "system" && out.role != "user" && out.role != "assistant" && out.role != "tool")
    return Fail(invalid_param(at + "/role",
                              "must be \"system\", \"user\", \"assistant\" or \"tool\", not \"" + out.role + "\""));
  const bool calls = out.role == "assistant" && m.contains("tool_calls") && !m["tool_calls"].is_null();
  if (calls) {
    auto parsed = parse_message_tool_calls(m["tool_calls"], at + "/tool_calls");
    if (!parsed) return Fail(parsed.error());
    out.tool_calls = std::move(*parsed);
  }
  if (out.role == "tool") {
    if (!m.contains("tool_call_id") || !m["tool_call_id"].is_string())
      return Fail(invalid_param(at + "/tool_call_id", "is required: the id of the tool call this message answers"));
    out.tool_call_id = m["tool_call_id"].get<std::string>();
  }
  if (!m.contains("content") || m["content"].is_null()) {
    if (!out.tool_calls.empty()) return out;  // a call without text
    return Fail(invalid_param(at + "/content", "is required"));
  }
  auto content = message_content(m["content"], at + "/content");
  if (!content) return Fail(content.error());
  out.content = std::move(*content);
  return out;
}

std::expected<std::vector<ChatMessage>, ApiError> parse_messages(const json& body) {
  if (!body.contains("messages")) return Fail(invalid_param("/messages", "is required (an array of {role, content})"));
  const json& m = body["messages"];
  if (!m.is_array() || m.empty()) return Fail(invalid_param("/messages", "must be a non-empty array of {role, content}"));
  std::vector<ChatMessage> out;
  for (std::size_t i = 0; i < m.size(); ++i) {
    auto message = parse_message(m[i], "/messages/" + std::to_string(i));
    if (!message) return Fail(message.error());
    out.push_back(std::move(*message));
  }
  if (auto e = check_tool_call_ids(out)) return Fail(*e);
  return out;
}

std::expected<std::string, ApiError> parse_prompt(const json& body) {
  if (!body.contains("prompt")) return Fail(invalid_param("/prompt", "is required (a string)"));
  const json& p = body["prompt"];
  if (p.is_string()) return p.get<std::string>();
  if (p.is_array() && p.size() == 1 && p[0].is_string()) return p[0].get<std::string>();
  return Fail(invalid_param("/prompt", "must be a string (or an array of exactly one string)"));
}

bool present(const json& body, const char* key) { return body.contains(key) && !body[key].is_null(); }

std::optional<ApiError> parse_sampling(const json& body, int cap, SamplingOptions& s) {
  // Types here; ranges by the one check_sampling (common/sampling_settings.hpp), each
  // reported with its field as "param". On top of those, max_tokens is capped by this
  // server's limits.max_tokens (a deployment limit, not a sampling range).
  const char* max_key = present(body, "max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  auto integer = [&](const char* key, int& out) -> std::optional<ApiError> {
    if (!present(body, key)) return std::nullopt;
    const json& v = body[key];
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<std::uint64_t>() > std::uint64_t(INT_MAX)) ||
        (!v.is_number_unsigned() && (v.get<long long>() < INT_MIN || v.get<long long>() > INT_MAX)))
      return invalid_param(std::string("/") + key, "must be an integer");
    out = v.get<int>();
    return std::nullopt;
  };
  auto number = [&](const char* key, double& out) -> std::optional<ApiError> {
    if (!present(body, key)) return std::nullopt;
    const json& v = body[key];
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      return invalid_param(std::string("/") + key, "must be a number");
    out = v.get<double>();
    return std::nullopt;
  };
  if (present(body, max_key)) {
    if (auto e = integer(max_key, s.max_tokens)) return e;
  } else {
    s.max_tokens = std::min(s.max_tokens, cap);
  }
  if (auto e = number("temperature", s.temperature)) return e;
  if (auto e = number("top_p", s.top_p)) return e;
  if (auto e = integer("top_k", s.top_k)) return e;
  if (auto errors = sampling_errors(s); !errors.empty()) {
    const SamplingFieldError& e = errors.front();
    const std::string field = e.field == "max_tokens" ? max_key : std::string(e.field);
    // "'/top_p' must be in 0..1 (got 1.5)": the message less its leading field name.
    return invalid_param("/" + field, e.message.substr(e.field.size() + 1));
  }
  if (s.max_tokens > cap)
    return invalid_param(std::string("/") + max_key,
                         "must be at most " + std::to_string(cap) + " (this server's limits.max_tokens)");
  if (present(body, "seed")) {
    const json& v = body["seed"];
    if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<long long>() < 0))
      return invalid_param("/seed", "must be a non-negative integer");
    s.seed = v.get<std::uint64_t>();
  }
  if (present(body, "stop")) {
    const json& v = body["stop"];
    std::vector<std::string> stop;
    if (v.is_string()) {
      stop.push_back(v.get<std::string>());
    } else if (v.is_array() && v.size() <= 4) {
      for (const auto& e : v) {
        if (!e.is_string()) return invalid_param("/stop", "must be a string or an array of up to 4 strings");
        stop.push_back(e.get<std::string>());
      }
    } else {
      return invalid_param("/stop", "must be a string or an array of up to 4 strings");
    }
    for (const auto& st : stop)
      if (st.empty()) return invalid_param("/stop", "must not contain an empty string");
    s.stop = std::move(stop);
  }
  if (present(body, "n") && (!body["n"].is_number_integer() || body["n"].get<long long>() != 1))
    return invalid_param("/n", "must be 1 (one choice per request is supported)");
  return std::nullopt;
}

}  // namespace

std::expected<CompletionRequest, ApiError> parse_completion_request(const json& body, bool chat, int max_tokens_cap,
                                                                    std::string_view raw_body) {
  if (!body.is_object()) return Fail(bad_request("invalid_request", "the request body must be a JSON object"));
  CompletionRequest r;
  r.chat = chat;
  if (present(body, "model") && !body["model"].is_string()) return Fail(invalid_param("/model", "must be a string"));
  if (chat) {
    auto messages = parse_messages(body);
    if (!messages) return Fail(messages.error());
    r.generate.messages = std::move(*messages);
  } else {
    auto prompt = parse_prompt(body);
    if (!prompt) return Fail(prompt.error());
    r.generate.raw_prompt = std::move(*prompt);
  }
  if (auto e = parse_sampling(body, max_tokens_cap, r.generate.sampling)) return Fail(*e);
  auto schema = parse_response_format(body, raw_body);
  if (!schema) return Fail(schema.error());
  r.generate.json_schema = std::move(*schema);
  if (chat)
    if (auto e = parse_tools(body, raw_body, r.generate)) return Fail(*e);
  if (present(body, "stream")) {
    if (!body["stream"].is_boolean()) return Fail(invalid_param("/stream", "must be true or false"));
    r.stream = body["stream"].get<bool>();
  }
  if (present(body, "stream_options")) {
    const json& o = body["stream_options"];
    if (!o.is_object()) return Fail(invalid_param("/stream_options", "must be an object"));
    if (o.contains("include_usage")) {
      if (!o["include_usage"].is_boolean())
        return Fail(invalid_param("/stream_options/include_usage", "must be true or false"));
      r.include_usage = o["include_usage"].get<bool>();
    }
  }
  return r;
}

std::string finish_reason(const GenerateResult& result) {
  const FinishReason r = result.finish_reason;
  return to_string(r == FinishReason::length || r == FinishReason::tool_calls ? r : FinishReason::stop);
}

nlohmann::ordered_json tool_calls_json(const GenerateResult& result, bool delta) {
  auto calls = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < result.tool_calls.size(); ++i) {
    const ChatToolCall& c = result.tool_calls[i];
    nlohmann::ordered_json call;
    if (delta) call["index"] = i;
    call["id"] = c.id;
    call["type"] = "function";
    call["function"] = {{"name", c.name}, {"arguments", c.arguments}};
    calls.push_back(std::move(call));
  }
  return calls;
}

nlohmann::ordered_json usage_json(const GenerateResult& result) {
  nlohmann::ordered_json u;
  u["prompt_tokens"] = result.prompt_tokens;
  u["completion_tokens"] = result.generated_tokens;
  u["total_tokens"] = result.prompt_tokens + result.generated_tokens;
  u["prompt_tokens_details"] = {{"cached_tokens", result.cached_tokens}};
  return u;
}

namespace {

// The frame every completion document and chunk shares: id, object, created, model, one choice.
nlohmann::ordered_json completion_doc(const std::string& id, const char* object, long created, const std::string& model,
                                      nlohmann::ordered_json choice) {
  nlohmann::ordered_json doc;
  doc["id"] = id;
  doc["object"] = object;
  doc["created"] = created;
  doc["model"] = model;
  doc["choices"] = nlohmann::ordered_json::array({std::move(choice)});
  return doc;
}

}  // namespace

nlohmann::ordered_json completion_response(bool chat, const std::string& id, long created, const std::string& model,
                                           const GenerateResult& result) {
  nlohmann::ordered_json choice;
  choice["index"] = 0;
  if (chat) {
    choice["message"] = {{"role", "assistant"}, {"content", result.text}};
    if (!result.tool_calls.empty()) {
      if (result.text.empty()) choice["message"]["content"] = nullptr;
      choice["message"]["tool_calls"] = tool_calls_json(result, false);
    }
  } else {
    choice["text"] = result.text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason(result);
  nlohmann::ordered_json doc =
      completion_doc(id, chat ? "chat.completion" : "text_completion", created, model, std::move(choice));
  doc["usage"] = usage_json(result);
  return doc;
}

nlohmann::ordered_json completion_chunk(bool chat, const std::string& id, long created, const std::string& model,
                                        std::string_view content, bool role, const std::string& finish) {
  nlohmann::ordered_json choice;
  choice["index"] = 0;
  if (chat) {
    nlohmann::ordered_json delta = nlohmann::ordered_json::object();
    if (role) delta["role"] = "assistant";
    if (!content.empty() || role) delta["content"] = std::string(content);
    choice["delta"] = std::move(delta);
  } else {
    choice["text"] = std::string(content);
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(finish);
  return completion_doc(id, chat ? "chat.completion.chunk" : "text_completion", created, model, std::move(choice));
}

std::string dump(const nlohmann::ordered_json& doc) {
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string sse_data(const nlohmann::ordered_json& doc, const std::string& event) {
  std::string out;
  if (!event.empty()) out += "event: " + event + "\n";
  out += "data: " + dump(doc) + "\n\n";  // dump() never emits a raw newline
  return out;
}

}  // namespace arbor::server

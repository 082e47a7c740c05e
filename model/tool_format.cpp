#include "model/tool_format.hpp"

#include <algorithm>
#include <cctype>

#include "common/json_text.hpp"

namespace arbor::model {
namespace {

Json parse_schema(const std::string& text) {
  auto j = parse_json_text<Json>(text);
  return j ? *j : Json::object();
}

}  // namespace

std::string tools_system_text(std::span<const ToolSignature> tools) {
  std::string out =
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
  for (const auto& t : tools) {
    Json fn = Json::object();
    fn["name"] = t.name;
    fn["description"] = t.description;
    fn["parameters"] = parse_schema(t.parameters);
    Json entry = Json::object();
    entry["type"] = "function";
    entry["function"] = std::move(fn);
    out += '\n';
    out += entry.dump();
  }
  out +=
      "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
      "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
      "<args-json-object>}\n</tool_call>";
  return out;
}

std::string tool_call_schema(std::span<const ToolSignature> tools) {
  Json alternatives = Json::array();
  for (const auto& t : tools) {
    Json call = Json::object();
    call["type"] = "object";
    call["properties"] = Json::object();
    call["properties"]["name"] = Json{{"const", t.name}};
    call["properties"]["arguments"] = parse_schema(t.parameters);
    call["required"] = Json::array({"name", "arguments"});
    call["additionalProperties"] = false;
    alternatives.push_back(std::move(call));
  }
  if (alternatives.size() == 1) return alternatives[0].dump();
  return Json{{"anyOf", std::move(alternatives)}}.dump();
}

std::string tool_response_text(std::string_view result) {
  return "<tool_response>\n" + std::string(result) + "\n</tool_response>";
}

Result<ToolCall> parse_tool_call(std::string_view json_text) {
  auto doc = parse_json_text<Json>(json_text);
  if (!doc) return fail(ErrorCode::invalid_argument, "tool call is not JSON: " + doc.error().message);
  if (!doc->is_object() || !doc->contains("name") || !(*doc)["name"].is_string() || !doc->contains("arguments"))
    return fail(ErrorCode::invalid_argument, "tool call must be {\"name\": ..., \"arguments\": {...}}, got " +
                                                 doc->dump());
  ToolCall call{(*doc)["name"].get<std::string>(), (*doc)["arguments"]};
  // The generation form writes name then arguments, compactly: the arguments are the
  // bytes between that head and the closing brace. Any other layout: re-serialized.
  const std::string head = "{\"name\":" + Json(call.name).dump() + ",\"arguments\":";
  const std::string_view text = json_text;
  if (text.starts_with(head) && text.ends_with('}') && text.size() > head.size() + 1) {
    std::string args(text.substr(head.size(), text.size() - head.size() - 1));
    if (auto same = parse_json_text<Json>(args); same && *same == call.arguments) call.arguments_text = std::move(args);
  }
  if (call.arguments_text.empty()) call.arguments_text = call.arguments.dump();
  return call;
}

bool valid_function_name(std::string_view name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

std::string tool_call_text(std::string_view name, std::string_view arguments_json) {
  return std::string(kToolCallHead) + "{\"name\":" + Json(std::string(name)).dump() + ",\"arguments\":" +
         std::string(arguments_json) + "}" + std::string(kToolCallTail);
}

}  // namespace arbor::model

#include "runtime/server/chat_tools.hpp"

#include <algorithm>
#include <set>

#include "common/json_text.hpp"
#include "model/tool_format.hpp"
#include "runtime/server/response_format.hpp"

namespace arbor::server {
namespace {

using nlohmann::json;

const char* kNameRule = "must be 1..64 letters, digits, '_' or '-'";

// `ordered`: the body with its keys in the order written (the schemas' generation order).
std::expected<FunctionTool, ApiError> parse_tool(const json& body, const model::Json& ordered, std::size_t i) {
  const std::string at = "/tools/" + std::to_string(i);
  const json& t = body["tools"][i];
  if (!t.is_object() || !t.contains("type") || t["type"] != "function")
    return std::unexpected(invalid_param(at + "/type", "must be \"function\" (the only tool type supported)"));
  if (!t.contains("function") || !t["function"].is_object())
    return std::unexpected(invalid_param(at + "/function", "is required: {\"name\": ..., \"parameters\": {...}}"));
  const json& f = t["function"];
  FunctionTool tool;
  if (!f.contains("name") || !f["name"].is_string() || !model::valid_function_name(f["name"].get<std::string>()))
    return std::unexpected(invalid_param(at + "/function/name", std::string("is required and ") + kNameRule));
  tool.name = f["name"].get<std::string>();
  if (f.contains("description") && !f["description"].is_null()) {
    if (!f["description"].is_string()) return std::unexpected(invalid_param(at + "/function/description", "must be a string"));
    tool.description = f["description"].get<std::string>();
  }
  if (f.contains("strict") && !f["strict"].is_null() && !f["strict"].is_boolean())
    return std::unexpected(invalid_param(at + "/function/strict", "must be true or false"));
  if (!f.contains("parameters") || f["parameters"].is_null()) return tool;  // no arguments: {}
  const std::string params_at = at + "/function/parameters";
  if (!f["parameters"].is_object() || !f["parameters"].contains("type") || f["parameters"]["type"] != "object")
    return std::unexpected(invalid_param(params_at, "must be a JSON Schema of an object ({\"type\": \"object\", "
                                                    "\"properties\": {...}})"));
  auto schema = enforceable_schema(ordered.at(model::Json::json_pointer(params_at)), params_at,
                                   "tools[" + std::to_string(i) + "]");
  if (!schema) return std::unexpected(schema.error());
  tool.parameters = std::move(*schema);
  return tool;
}

std::optional<ApiError> parse_tool_choice(const json& body, GenerateRequest& out) {
  if (!body.contains("tool_choice") || body["tool_choice"].is_null()) return std::nullopt;
  const json& c = body["tool_choice"];
  const char* rule = "must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";
  if (c.is_string()) {
    const std::string s = c.get<std::string>();
    if (s == "auto") out.tool_choice = ToolChoice::automatic;
    else if (s == "none") out.tool_choice = ToolChoice::none;
    else if (s == "required") out.tool_choice = ToolChoice::required;
    else return invalid_param("/tool_choice", std::string(rule) + ", not \"" + s + "\"");
  } else if (c.is_object() && c.contains("type") && c["type"] == "function" && c.contains("function") &&
             c["function"].is_object()) {
    const json& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string())
      return invalid_param("/tool_choice/function/name", "is required: the name of one of the tools");
    out.tool_choice = ToolChoice::function;
    out.tool_choice_name = f["name"].get<std::string>();
    const bool known = std::any_of(out.tools.begin(), out.tools.end(),
                                   [&](const FunctionTool& t) { return t.name == out.tool_choice_name; });
    if (!known)
      return invalid_param("/tool_choice/function/name",
                           "names '" + out.tool_choice_name + "', which is not among the request's tools");
  } else {
    return invalid_param("/tool_choice", rule);
  }
  if (out.tools.empty() && (out.tool_choice == ToolChoice::required || out.tool_choice == ToolChoice::function))
    return invalid_param("/tool_choice", "asks for a tool call, but the request has no tools");
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_tools(const json& body, std::string_view raw_body, GenerateRequest& out) {
  if (body.contains("tools") && !body["tools"].is_null()) {
    const json& tools = body["tools"];
    if (!tools.is_array()) return invalid_param("/tools", "must be an array of {\"type\": \"function\", \"function\": {...}}");
    const model::Json ordered = ordered_body(body, raw_body);  // once for all the tools
    for (std::size_t i = 0; i < tools.size(); ++i) {
      auto tool = parse_tool(body, ordered, i);
      if (!tool) return tool.error();
      for (const auto& earlier : out.tools)
        if (earlier.name == tool->name)
          return invalid_param("/tools/" + std::to_string(i) + "/function/name",
                               "'" + tool->name + "' is the name of an earlier tool; names must be distinct");
      out.tools.push_back(std::move(*tool));
    }
  }
  if (auto e = parse_tool_choice(body, out)) return e;
  if (!out.tools.empty() && out.json_schema)
    return invalid_param("/response_format", "cannot be combined with tools (yet): send the structured request "
                                             "without tools");
  return std::nullopt;
}

std::expected<std::vector<ChatToolCall>, ApiError> parse_message_tool_calls(const json& calls, const std::string& at) {
  if (!calls.is_array()) return std::unexpected(invalid_param(at, "must be an array of {id, type, function}"));
  std::vector<ChatToolCall> out;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const std::string c_at = at + "/" + std::to_string(i);
    const json& c = calls[i];
    if (!c.is_object() || !c.contains("id") || !c["id"].is_string() || c["id"].get<std::string>().empty())
      return std::unexpected(invalid_param(c_at + "/id", "is required: the call's id (a non-empty string)"));
    if (c.contains("type") && c["type"] != "function")
      return std::unexpected(invalid_param(c_at + "/type", "must be \"function\""));
    if (!c.contains("function") || !c["function"].is_object())
      return std::unexpected(invalid_param(c_at + "/function", "is required: {\"name\": ..., \"arguments\": \"{...}\"}"));
    const json& f = c["function"];
    if (!f.contains("name") || !f["name"].is_string())
      return std::unexpected(invalid_param(c_at + "/function/name", "is required (a string)"));
    if (!f.contains("arguments") || !f["arguments"].is_string())
      return std::unexpected(invalid_param(c_at + "/function/arguments", "is required: the arguments object as JSON text"));
    std::string arguments = f["arguments"].get<std::string>();
    if (arguments.empty()) arguments = "{}";
    auto parsed = parse_json_text<json>(arguments);
    if (!parsed || !parsed->is_object())
      return std::unexpected(invalid_param(c_at + "/function/arguments", "must be a JSON object written as a string"));
    out.push_back({c["id"].get<std::string>(), f["name"].get<std::string>(), std::move(arguments)});
  }
  return out;
}

std::optional<ApiError> check_tool_call_ids(const std::vector<ChatMessage>& messages) {
  std::set<std::string> calls;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    for (const auto& c : messages[i].tool_calls) calls.insert(c.id);
    if (messages[i].role == "tool" && !calls.contains(messages[i].tool_call_id))
      return invalid_param("/messages/" + std::to_string(i) + "/tool_call_id",
                           "'" + messages[i].tool_call_id +
                               "' is not the id of a tool call in an earlier assistant message");
  }
  return std::nullopt;
}

}  // namespace arbor::server

// The tool fields of an OpenAI chat request, mapped onto GenerateRequest (the runtime
// runs the calls' steps, runtime/generation.cpp):
//   tools        [{"type": "function", "function": {"name", "description", "parameters",
//                 "strict"}}]: each name 1..64 letters, digits, '_' or '-' and distinct;
//                 parameters a JSON Schema of an object the engine can enforce (whatever
//                 "strict" says: the call is always generated under it); a keyword it
//                 cannot enforce is a 400 naming its pointer
//                 (/tools/1/function/parameters/properties/n/multipleOf).
//   tool_choice  "auto" (default) | "none" | "required" |
//                {"type": "function", "function": {"name": NAME}}
//   assistant messages' tool_calls [{"id", "type": "function", "function": {"name",
//                 "arguments": JSON text}}] (content may then be null), and
//   "tool" messages {"tool_call_id", "content"}: the id must be that of a call in an
//                 earlier assistant message.
// Errors are 400s naming the field's JSON pointer.
#pragma once

#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "arbor/runtime.hpp"
#include "runtime/server/api_error.hpp"

namespace arbor::server {

// Reads tools and tool_choice into `out`. `raw_body` keeps the schemas' key order.
std::optional<ApiError> parse_tools(const nlohmann::json& body, std::string_view raw_body, GenerateRequest& out);

// An assistant message's tool_calls (at = its pointer).
std::expected<std::vector<ChatToolCall>, ApiError> parse_message_tool_calls(const nlohmann::json& calls,
                                                                            const std::string& at);

// Every tool message answers a call of an earlier assistant message.
std::optional<ApiError> check_tool_call_ids(const std::vector<ChatMessage>& messages);

}  // namespace arbor::server

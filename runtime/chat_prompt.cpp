#include "runtime/chat_prompt.hpp"

#include <algorithm>

#include "common/json_text.hpp"
#include "model/json_grammar.hpp"

namespace arbor {
namespace {

// The parameters as compact JSON text (key order kept), or what is wrong with them.
Result<std::string> checked_parameters(const FunctionTool& tool) {
  const std::string at = "tool '" + tool.name + "': parameters ";
  auto schema = parse_json_text<model::Json>(tool.parameters);
  if (!schema) return fail(ErrorCode::invalid_argument, at + "is not JSON: " + schema.error().message);
  if (!schema->is_object() || !schema->contains("type") || (*schema)["type"] != "object")
    return fail(ErrorCode::invalid_argument,
                at + "must be a JSON Schema of an object ({\"type\": \"object\", \"properties\": {...}})");
  std::vector<model::SchemaError> errors;
  if (auto grammar = model::JsonGrammar::from_json(*schema, &errors); !grammar)
    return fail(ErrorCode::invalid_argument,
                at + "cannot be enforced: " + (errors.empty() ? grammar.error().message : model::describe(errors)));
  return schema->dump();
}

}  // namespace

Result<std::vector<model::ToolSignature>> request_tools(const GenerateRequest& r) {
  const bool needs_tools = r.tool_choice == ToolChoice::required || r.tool_choice == ToolChoice::function;
  if (r.tools.empty()) {
    if (needs_tools) return fail(ErrorCode::invalid_argument, "tool_choice required or function needs tools");
    return std::vector<model::ToolSignature>{};
  }
  if (r.raw_prompt) return fail(ErrorCode::invalid_argument, "tools need chat messages, not a raw_prompt");
  if (r.json_schema)
    return fail(ErrorCode::invalid_argument, "tools and json_schema cannot be combined in one request; send them in "
                                             "separate requests");
  std::vector<model::ToolSignature> out;
  for (const auto& t : r.tools) {
    if (!model::valid_function_name(t.name))
      return fail(ErrorCode::invalid_argument, "tool name '" + t.name + "' must be 1..64 letters, digits, '_' or '-'");
    if (std::any_of(out.begin(), out.end(), [&](const auto& s) { return s.name == t.name; }))
      return fail(ErrorCode::invalid_argument, "tool name '" + t.name + "' is given twice");
    auto parameters = checked_parameters(t);
    if (!parameters) return std::unexpected(parameters.error());
    out.push_back({t.name, t.description, std::move(*parameters)});
  }
  if (r.tool_choice == ToolChoice::function &&
      std::none_of(out.begin(), out.end(), [&](const auto& s) { return s.name == r.tool_choice_name; }))
    return fail(ErrorCode::invalid_argument, "tool_choice names '" + r.tool_choice_name + "', which is not among the tools");
  return out;
}

std::vector<model::ChatMessage> chat_messages(const GenerateRequest& request, const model::ChatTemplate& chat,
                                              const std::string& tools_text) {
  std::vector<model::ChatMessage> out;
  bool in_results = false;  // the last message out holds tool results
  for (const auto& m : request.messages) {
    if (m.role == "tool") {
      const std::string block = model::tool_response_text(m.content);
      if (in_results) {
        out.back().content += "\n" + block;
      } else {
        out.push_back({"user", block});
      }
      in_results = true;
      continue;
    }
    in_results = false;
    std::string content = m.content;
    for (const auto& call : m.tool_calls) content += model::tool_call_text(call.name, call.arguments);
    out.push_back({m.role, std::move(content)});
  }
  if (tools_text.empty()) return out;
  std::size_t at = 0;
  if (!out.empty() && out.front().role == "system") {
    at = 1;
  } else if (!chat.default_system_message().empty()) {
    out.insert(out.begin(), {"system", chat.default_system_message()});
    at = 1;
  }
  out.insert(out.begin() + std::ptrdiff_t(at), {"system", tools_text});
  return out;
}

Result<std::vector<std::int32_t>> prompt_ids(const GenerateRequest& request,
                                             const std::vector<model::ToolSignature>& signatures,
                                             const model::Tokenizer& tok, const model::ChatTemplate& chat) {
  std::vector<std::int32_t> ids;
  if (request.raw_prompt) {
    if (tok.add_bos() && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
    auto encoded = tok.encode(*request.raw_prompt, true);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
    return ids;
  }
  if (request.messages.empty()) return fail(ErrorCode::invalid_argument, "generate: give messages or a raw_prompt");
  const auto messages = chat_messages(request, chat, signatures.empty() ? "" : model::tools_system_text(signatures));
  const auto segments = chat.render_segments(messages, true);
  return model::tokenize_segments(tok, segments, tok.add_bos()).ids;
}

}  // namespace arbor

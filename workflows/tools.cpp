#include "workflows/tools.hpp"

#include <algorithm>
#include <cctype>

#include "common/json_text.hpp"
#include "model/json_grammar.hpp"
#include "workflows/calculator.hpp"
#include "workflows/documents.hpp"

namespace arbor::workflows {
namespace {

bool valid_tool_name(const std::string& s) {
  if (s.empty() || s.size() > 64 || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; });
}

// The argument `key` as a string, or an error naming it (the call schema makes this
// hold for generated calls; an application may call handlers directly).
std::expected<std::string, std::string> string_argument(const model::Json& args, const char* key) {
  if (!args.is_object() || !args.contains(key) || !args[key].is_string())
    return std::unexpected(std::string("expected {\"") + key + "\": string}, got " + args.dump());
  return args[key].get<std::string>();
}

Tool calculator() {
  Tool t;
  t.signature = {"calculator",
                 "Evaluates an arithmetic expression: + - * / % ^ (power), parentheses, decimals, unary minus. "
                 "Example: (2 + 3) * 4.5",
                 R"({"type":"object","properties":{"expression":{"type":"string","maxLength":200}},)"
                 R"("required":["expression"],"additionalProperties":false})"};
  t.handler = [](const model::Json& args, const ToolContext&) -> ToolOutput {
    auto expression = string_argument(args, "expression");
    if (!expression) return std::unexpected(expression.error());
    auto value = evaluate_expression(*expression);
    if (!value) return std::unexpected("cannot evaluate '" + *expression + "': " + value.error());
    return format_number(*value);
  };
  return t;
}

Tool read_file() {
  Tool t;
  t.signature = {"read_file",
                 "Reads a text file by its path relative to the workflow's folder.",
                 R"({"type":"object","properties":{"path":{"type":"string","maxLength":256}},)"
                 R"("required":["path"],"additionalProperties":false})"};
  t.handler = [](const model::Json& args, const ToolContext& context) -> ToolOutput {
    auto path = string_argument(args, "path");
    if (!path) return std::unexpected(path.error());
    return read_tool_file(context.files, *path);
  };
  return t;
}

}  // namespace

ToolRegistry ToolRegistry::builtins() {
  ToolRegistry r;
  (void)r.add(calculator());
  (void)r.add(read_file());
  return r;
}

Result<void> ToolRegistry::add(Tool tool) {
  const auto& sig = tool.signature;
  if (!valid_tool_name(sig.name))
    return fail(ErrorCode::invalid_argument, "tool name '" + sig.name +
                                                 "' must be 1..64 letters, digits, '_' or '-', starting with a letter or '_'");
  if (find(sig.name))
    return fail(ErrorCode::invalid_argument, "tool '" + sig.name + "' is already registered (names: " + [&] {
      std::string all;
      for (const auto& n : names()) all += (all.empty() ? "" : ", ") + n;
      return all;
    }() + "); choose another name");
  if (!tool.handler) return fail(ErrorCode::invalid_argument, "tool '" + sig.name + "' has no handler");
  auto schema = parse_json_text<model::Json>(sig.parameters);
  if (!schema)
    return fail(ErrorCode::invalid_argument, "tool '" + sig.name + "': parameters is not JSON: " + schema.error().message);
  if (!schema->is_object() || !schema->contains("type") || (*schema)["type"] != "object")
    return fail(ErrorCode::invalid_argument, "tool '" + sig.name +
                                                 "': parameters must be a JSON Schema of an object ({\"type\": "
                                                 "\"object\", \"properties\": {...}}), got " + sig.parameters);
  std::vector<model::SchemaError> errors;
  if (auto grammar = model::JsonGrammar::from_json(*schema, &errors); !grammar)
    return fail(ErrorCode::invalid_argument, "tool '" + sig.name + "': parameters cannot be enforced: " +
                                                 (errors.empty() ? grammar.error().message : model::describe(errors)));
  tool.signature.parameters = schema->dump();  // compact, key order kept
  tools_.push_back(std::move(tool));
  return {};
}

const Tool* ToolRegistry::find(std::string_view name) const {
  for (const auto& t : tools_)
    if (t.signature.name == name) return &t;
  return nullptr;
}

std::vector<std::string> ToolRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& t : tools_) out.push_back(t.signature.name);
  return out;
}

Diagnostics check_agent_tools(const Plan& plan, const ToolRegistry& registry, const std::string& file) {
  Diagnostics diag(file);
  std::string known;
  for (const auto& n : registry.names()) known += (known.empty() ? "" : ", ") + n;
  plan.visit([&](const AgentPlan& a) {
    for (std::size_t i = 0; i < a.tools.size(); ++i) {
      if (registry.find(a.tools[i])) continue;
      const std::string at = i < a.tool_pointers.size() ? a.tool_pointers[i] : "";
      // A fan-out repeats its agents: one error per place written.
      if (diag.find(at)) continue;
      diag.add({Severity::error, at, 0, 0,
                "unknown tool '" + a.tools[i] + "' (agent '" + a.spec_id + "'); known tools: " + known +
                    " (an application registers its own with Runtime::add_tool before starting the run)"});
    }
  });
  return diag;
}

}  // namespace arbor::workflows

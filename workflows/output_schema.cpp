#include "workflows/output_schema.hpp"

#include "common/json_text.hpp"
#include "model/json_grammar.hpp"
#include "workflows/parser.hpp"

namespace arbor::workflows {
namespace {

void check_agent(const model::Json& doc, AgentSpec& agent, const PositionIndex& index, Diagnostics& diag) {
  for (auto& child : agent.children) check_agent(doc, child, index, diag);
  if (!agent.output_schema_pointer) return;
  const std::string& at = *agent.output_schema_pointer;
  const model::Json& schema = doc.at(model::Json::json_pointer(at));
  std::vector<model::SchemaError> errors;
  auto grammar = model::JsonGrammar::from_json(schema, &errors);
  if (grammar) {
    agent.output_schema = schema.dump();
    return;
  }
  if (errors.empty()) return report(diag, index, at, "output_schema: " + grammar.error().message);
  for (const auto& e : errors) report(diag, index, at + e.pointer, "output_schema: " + e.message);
}

bool any_schema(const std::vector<AgentSpec>& agents) {
  for (const auto& a : agents)
    if (a.output_schema_pointer || any_schema(a.children)) return true;
  return false;
}

}  // namespace

void check_output_schemas(std::string_view text, WorkflowSpec& spec, const PositionIndex& index, Diagnostics& diag) {
  if (!any_schema(spec.agents)) return;
  auto doc = parse_json_text<model::Json>(text);  // parsed before (as nlohmann::json): cannot fail here
  if (!doc) return report(diag, index, "", "invalid JSON: " + doc.error().message);
  for (auto& a : spec.agents) check_agent(*doc, a, index, diag);
}

}  // namespace arbor::workflows

#include <fstream>
#include <sstream>

#include "common/json_text.hpp"
#include "workflows/lint.hpp"
#include "workflows/output_schema.hpp"
#include "workflows/parser.hpp"
#include "workflows/plan_builder.hpp"
#include "workflows/resolve.hpp"
#include "workflows/validator.hpp"
#include "workflows/workflow.hpp"

namespace arbor::workflows {

LoadResult<Plan> load_workflow_text(std::string_view text, const DocumentAccess& documents,
                                    const InputOverrides& overrides, const std::string& file_name) {
  Diagnostics diag(file_name);
  auto doc = parse_json_text(text);
  if (!doc) {
    report_at(diag, "", {doc.error().line, doc.error().column}, "invalid JSON: " + doc.error().message);
    return std::unexpected(std::move(diag));
  }
  PositionIndex index = PositionIndex::build(text);
  WorkflowSpec spec = parse_spec(*doc, index, diag);
  check_output_schemas(text, spec, index, diag);
  Plan plan;
  plan.name = spec.name;
  plan.tenant = spec.tenant;
  plan.description = spec.description;
  plan.inputs = resolve_inputs(spec, overrides, index, diag);
  plan.prefixes = resolve_prefixes(spec, plan.inputs, documents, index, diag);
  AgentGraph graph = validate_agents(spec, plan.inputs, index, diag);
  if (diag.has_errors()) return std::unexpected(std::move(diag));
  build_agents(spec, graph, plan, index, diag);
  if (diag.has_errors()) return std::unexpected(std::move(diag));
  lint_plan(spec, index, plan);
  return plan;
}

LoadResult<Plan> load_workflow_file(const std::filesystem::path& path, const InputOverrides& overrides) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    Diagnostics diag(path.string());
    diag.add({Severity::error, "", 0, 0, "cannot open workflow file (does it exist and is it readable?)"});
    return std::unexpected(std::move(diag));
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return load_workflow_text(ss.str(), DocumentAccess::local_to(path.parent_path().string()), overrides,
                            path.string());
}

Result<InputOverrides> parse_input_overrides(const std::vector<std::string>& key_values) {
  InputOverrides out;
  for (const auto& kv : key_values) {
    std::size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail(ErrorCode::invalid_argument, "--input '" + kv + "': expected KEY=VALUE, e.g. --input topic=rust");
    if (!out.emplace(kv.substr(0, eq), kv.substr(eq + 1)).second)
      return fail(ErrorCode::invalid_argument, "--input " + kv.substr(0, eq) + " is given twice; give it once");
  }
  return out;
}

}  // namespace arbor::workflows

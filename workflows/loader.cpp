#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "workflows/lint.hpp"
#include "workflows/parser.hpp"
#include "workflows/plan_builder.hpp"
#include "workflows/resolve.hpp"
#include "workflows/validator.hpp"
#include "workflows/workflow.hpp"

namespace arbor::workflows {

namespace {

// nlohmann reports "[json.exception.parse_error.101] parse error at line 3, column 5:
// syntax error while parsing object - ..."; keep the part after the position.
std::string syntax_message(const std::string& what) {
  std::size_t at = what.find("column ");
  if (at != std::string::npos) at = what.find(": ", at);
  std::string msg = at == std::string::npos ? what : what.substr(at + 2);
  return "invalid JSON: " + msg;
}

}  // namespace

LoadResult<Plan> load_workflow_text(std::string_view text, const std::filesystem::path& base_dir,
                                    const InputOverrides& overrides, const std::string& file_name) {
  Diagnostics diag(file_name);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is the 1-based offset of the character that broke the syntax.
    TextPosition at = PositionIndex::build(text).at_offset(e.byte > 0 ? e.byte - 1 : 0);
    report_at(diag, "", at, syntax_message(e.what()));
    return std::unexpected(std::move(diag));
  }
  PositionIndex index = PositionIndex::build(text);
  WorkflowSpec spec = parse_spec(doc, index, diag);
  Plan plan;
  plan.name = spec.name;
  plan.tenant = spec.tenant;
  plan.description = spec.description;
  plan.inputs = resolve_inputs(spec, overrides, index, diag);
  plan.prefixes = resolve_prefixes(spec, plan.inputs, base_dir, index, diag);
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
  return load_workflow_text(ss.str(), path.parent_path(), overrides, path.string());
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

// Tools an agent may call (issue 11 section 3): a name, a description, the JSON Schema
// of its arguments (model/tool_format.hpp's ToolSignature) and a handler. The actors
// run the handlers (actors/tool_runner.hpp); this layer only defines and checks them.
//
// Built-ins (ToolRegistry::builtins()):
//   calculator {"expression": string}  arithmetic (workflows/calculator.hpp)
//   read_file  {"path": string}        a file below the run's folder (read_tool_file in
//                                      workflows/documents.hpp: confined, never "..",
//                                      never a symbolic link; none without a folder)
// An embedding application adds its own with Runtime::add_tool.
//
// A ToolRegistry is a value: copy it to add to it; a run reads an immutable snapshot.
#pragma once

#include <expected>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "common/document_access.hpp"
#include "common/result.hpp"
#include "model/tool_format.hpp"
#include "workflows/diagnostics.hpp"
#include "workflows/plan.hpp"

namespace arbor::workflows {

// What a handler may use besides its arguments.
struct ToolContext {
  DocumentAccess files = DocumentAccess::no_files();  // read_file's folder (the run's)
};

// The handler's answer: the result text for the model, or an error message (which the
// model also sees, as an error result). A handler may throw: that is an error too.
using ToolOutput = std::expected<std::string, std::string>;
using ToolHandler = std::function<ToolOutput(const model::Json& arguments, const ToolContext& context)>;

struct Tool {
  model::ToolSignature signature;
  ToolHandler handler;
};

class ToolRegistry {
 public:
  static ToolRegistry builtins();

  // invalid_argument, with what to fix, for: a name that is not 1..64 letters, digits,
  // '_' or '-' (starting with a letter or '_'), a name already registered, no handler,
  // parameters that are not a JSON Schema of an object the engine can enforce.
  Result<void> add(Tool tool);
  const Tool* find(std::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::vector<Tool> tools_;
};

// Every agent's "tools" must name a registered tool: one error per unknown name, at
// its pointer (no line:column: the plan keeps none), listing the known names. `file`
// is what Diagnostics::format() prints first.
Diagnostics check_agent_tools(const Plan& plan, const ToolRegistry& registry, const std::string& file = "<text>");

}  // namespace arbor::workflows

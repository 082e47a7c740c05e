// Load-time resolution of the run-wide values: final input values (defaults <- command
// line overrides) and shared prefix texts (files read, {{inputs.*}} substituted).
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "workflows/diagnostics.hpp"
#include "workflows/plan.hpp"
#include "workflows/position_index.hpp"
#include "workflows/spec.hpp"

namespace arbor::workflows {

std::map<std::string, InputValue> resolve_inputs(const WorkflowSpec& spec,
                                                 const std::map<std::string, std::string>& overrides,
                                                 const PositionIndex& index, Diagnostics& diag);

// Documents given as files are read relative to `base_dir` and used verbatim.
std::map<std::string, PrefixSpec> resolve_prefixes(const WorkflowSpec& spec,
                                                   const std::map<std::string, InputValue>& inputs,
                                                   const std::filesystem::path& base_dir,
                                                   const PositionIndex& index, Diagnostics& diag);

}  // namespace arbor::workflows

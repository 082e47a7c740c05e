// Load-time resolution of the run-wide values: final input values (defaults <- command
// line overrides) and shared prefix texts (files read, {{inputs.*}} substituted).
#pragma once

#include <map>
#include <string>

#include "common/document_access.hpp"
#include "workflows/diagnostics.hpp"
#include "workflows/plan.hpp"
#include "workflows/position_index.hpp"
#include "workflows/spec.hpp"

namespace arbor::workflows {

std::map<std::string, InputValue> resolve_inputs(const WorkflowSpec& spec,
                                                 const std::map<std::string, std::string>& overrides,
                                                 const PositionIndex& index, Diagnostics& diag);

// Documents given as files are read under `documents` (workflows/documents.hpp) and
// used verbatim.
std::map<std::string, PrefixSpec> resolve_prefixes(const WorkflowSpec& spec,
                                                   const std::map<std::string, InputValue>& inputs,
                                                   const DocumentAccess& documents,
                                                   const PositionIndex& index, Diagnostics& diag);

}  // namespace arbor::workflows

// Cross-reference checks over a parsed spec: duplicate agent ids, unknown prefix and
// agent references, fan-out sources, template syntax and variable scopes, dependency
// cycles (named), and whether every {{outputs.ID}} is certainly finished when read.
#pragma once

#include <map>
#include <string>

#include "workflows/diagnostics.hpp"
#include "workflows/graph.hpp"
#include "workflows/plan.hpp"
#include "workflows/position_index.hpp"
#include "workflows/spec.hpp"

namespace arbor::workflows {

// Builds the agent graph (templates compiled) and reports every problem into `diag`.
AgentGraph validate_agents(const WorkflowSpec& spec, const std::map<std::string, InputValue>& inputs,
                           const PositionIndex& index, Diagnostics& diag);

}  // namespace arbor::workflows

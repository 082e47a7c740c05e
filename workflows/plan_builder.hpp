// Expands a validated agent graph into the Plan's agent tree: fan-out instances with
// unique ids, inherited item/index, merged generation settings, depends_on and
// {{outputs.ID}} resolved to instance ids.
#pragma once

#include "workflows/diagnostics.hpp"
#include "workflows/graph.hpp"
#include "workflows/plan.hpp"
#include "workflows/position_index.hpp"
#include "workflows/spec.hpp"

namespace arbor::workflows {

constexpr std::size_t kMaxAgentInstances = 4096;

// Call only when validation found no errors. Fills plan.agents; reports an over-large
// expansion into `diag`.
void build_agents(const WorkflowSpec& spec, const AgentGraph& graph, Plan& plan,
                  const PositionIndex& index, Diagnostics& diag);

}  // namespace arbor::workflows

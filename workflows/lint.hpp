// Layout lint: warnings (never errors) about workflows that are valid but waste the
// shared-prefix cache (KV rule 6: context = SharedPrefix + TaskSuffix).
#pragma once

#include "workflows/plan.hpp"
#include "workflows/position_index.hpp"
#include "workflows/spec.hpp"

namespace arbor::workflows {

// Appends to plan.warnings:
//  - an agent with layout "task_first" (its task precedes the shared segment, so its
//    token path diverges from every other agent's at token 0);
//  - a shared prefix whose text contains per-agent variables ({{item}}, {{index}},
//    {{outputs.*}}, {{children}}, {{previous}}): prefixes are not per-agent templates;
//  - a prefix used by no agent, or by only one agent instance (nothing shares it).
void lint_plan(const WorkflowSpec& spec, const PositionIndex& index, Plan& plan);

}  // namespace arbor::workflows

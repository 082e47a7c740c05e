// Run-time expansion of a dynamic fan-out (for_each.output): the parent agent calls it
// once the source agent's output exists, and spawns what it returns.
#pragma once

#include <string>
#include <vector>

#include "common/result.hpp"
#include "workflows/plan.hpp"

namespace arbor::workflows {

// One instance of template `tmpl` (tmpl.dynamic set) per element of the list at
// tmpl.dynamic->path in `source_output` (the source agent's output text, a JSON
// document): ids "ID[0]", "ID[1]", ... (as static fan-out names them), item_value = the
// element, item = its rendering (json_path.hpp), index = its position; none for an
// empty list. Fails (invalid_argument) when the document has no list there, or when the
// list has more elements than max_children (the message names both numbers).
Result<std::vector<AgentPlan>> expand_dynamic(const AgentPlan& tmpl, const std::string& source_output);

}  // namespace arbor::workflows

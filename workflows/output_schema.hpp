// Load-time check of the agents' output_schema fields (constrained decoding): each one
// must be a JSON Schema the engine can enforce (model/json_grammar.hpp). Every keyword
// it cannot enforce is an error at its own JSON pointer inside the workflow
// ("/agents/0/output_schema/properties/n/multipleOf"), never silently ignored.
// A schema that compiles is stored in its AgentSpec as compact text in the key order
// written (properties are generated in that order), so the workflow text is read again
// with order-preserving objects (the spec's nlohmann::json sorts keys).
#pragma once

#include <string_view>

#include "workflows/diagnostics.hpp"
#include "workflows/position_index.hpp"
#include "workflows/spec.hpp"

namespace arbor::workflows {

void check_output_schemas(std::string_view text, WorkflowSpec& spec, const PositionIndex& index, Diagnostics& diag);

}  // namespace arbor::workflows

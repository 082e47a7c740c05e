// Shape checks: JSON -> WorkflowSpec. Reports wrong types, unknown fields (with the
// closest known name), missing required fields, duplicate keys and out-of-range
// numbers. Cross-references (ids, templates, cycles) are checked later (validator.hpp).
#pragma once

#include <nlohmann/json.hpp>

#include "workflows/diagnostics.hpp"
#include "workflows/position_index.hpp"
#include "workflows/spec.hpp"

namespace arbor::workflows {

// Collects into `diag`; the returned spec holds whatever parsed (check diag for errors).
WorkflowSpec parse_spec(const nlohmann::json& doc, const PositionIndex& index, Diagnostics& diag);

// Diagnostic helpers shared by the loading stages.
void report(Diagnostics& diag, const PositionIndex& index, const std::string& pointer,
            std::string message, Severity severity = Severity::error);
void report_at(Diagnostics& diag, const std::string& pointer, TextPosition at,
               std::string message, Severity severity = Severity::error);

}  // namespace arbor::workflows

// Public interface of workflows/: load a workflow (JSON) into a validated Plan.
//
// Loading is pure: it reads the workflow file and the prefix documents it names, and
// nothing else; it never runs an agent or touches a model. All problems found are
// returned together (a Diagnostics list, each with JSON pointer and line:column);
// lint warnings of a valid workflow travel in Plan::warnings. Thread-safe (no shared
// state). Cost: linear in the text plus O(agents^2) for the dependency checks.
#pragma once

#include <expected>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/document_access.hpp"
#include "common/result.hpp"
#include "workflows/diagnostics.hpp"
#include "workflows/plan.hpp"

namespace arbor::workflows {

// Input name -> value as typed on the command line ("--input topic=rust").
// String inputs take the text as is; number and boolean inputs must parse; list inputs
// take a JSON array ('["a","b"]') or a comma-separated list ("a, b").
using InputOverrides = std::map<std::string, std::string>;

// The error side carries every diagnostic (use .format() or .to_error()).
template <class T>
using LoadResult = std::expected<T, Diagnostics>;

// Reads `path`; prefix document files are the caller's own, relative to its folder
// (DocumentAccess::local_to).
LoadResult<Plan> load_workflow_file(const std::filesystem::path& path,
                                    const InputOverrides& overrides = {});

// `text` is the JSON (parsed by parse_json_text: at most 64 levels deep); `documents`
// says which prefix document files it may read; `file_name` is what diagnostics
// print before line:column.
LoadResult<Plan> load_workflow_text(std::string_view text, const DocumentAccess& documents,
                                    const InputOverrides& overrides = {},
                                    const std::string& file_name = "<text>");

// Splits "key=value" strings (the value may contain '='); fails on a missing '=' or
// an empty key, or a key given twice.
Result<InputOverrides> parse_input_overrides(const std::vector<std::string>& key_values);

}  // namespace arbor::workflows

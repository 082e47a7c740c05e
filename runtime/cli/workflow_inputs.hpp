// `--input KEY=VALUE` for run and validate, and how `arbor run` hands the inputs to
// several workflows: each workflow gets the inputs it declares; an input that none of
// them declares is an error that names it.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/result.hpp"
#include "workflows/workflow.hpp"

namespace arbor::cli {

// Declares the repeatable --input option on `app`, collected into `values`.
void declare_input_option(CLI::App& app, std::vector<std::string>& values);

// The input names a workflow file declares (the keys of its "inputs" object), or
// nullopt when the file cannot be read or is not a JSON object (the loader reports
// why when the workflow starts).
std::optional<std::set<std::string>> declared_inputs(const std::string& path);

// The inputs each workflow receives. One workflow gets them all (its loader names an
// input it does not declare). Of several, each gets those it declares, and one whose
// declarations are unknown (nullopt) gets them all; an input declared by none of them
// (all known) fails with invalid_argument naming it and what each workflow declares.
Result<std::vector<workflows::InputOverrides>> route_inputs(
    const std::vector<std::string>& paths, const std::vector<std::optional<std::set<std::string>>>& declared,
    const workflows::InputOverrides& inputs);

}  // namespace arbor::cli

// WorkflowSpec: the workflow as written, after shape checks (types, fields, ranges) and
// before cross-references are resolved. Internal to workflows/; every element keeps
// its JSON pointer so later stages can report positions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace arbor::workflows {

enum class InputType { string, number, boolean, list };

struct InputSpec {
  std::string name;
  std::string pointer;
  InputType type = InputType::string;
  std::optional<nlohmann::json> default_value;  // already checked against `type`
};

// Each field unset = inherit.
struct GenerationSpec {
  std::optional<int> max_tokens;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int> top_k;
  std::optional<std::uint64_t> seed;
  std::optional<std::vector<std::string>> stop;
};

struct TextSpec {
  std::string text;
  std::string pointer;
};

struct DocumentSpec {
  std::string pointer;
  std::optional<std::string> text;  // inline (templated with inputs)
  std::optional<std::string> file;  // relative to the workflow file (read verbatim)
  std::string title;
};

struct PrefixSrc {
  std::string id;
  std::string pointer;
  std::optional<TextSpec> system;
  std::vector<DocumentSpec> documents;
};

struct ForEachSpec {
  std::string pointer;
  std::vector<std::string> items;  // literal list
  std::optional<std::string> input;  // or: the name of a list input
  // or: a list in an earlier agent's structured output, "AGENT.PATH" (dynamic fan-out,
  // expanded at run time), with at most max_children elements
  std::optional<TextSpec> output;
  std::optional<int> max_children;
};

struct AgentSpec {
  std::string id;
  std::string pointer;
  std::optional<TextSpec> prefix;  // prefix id
  std::string layout = "prefix_first";
  std::string layout_pointer;
  std::optional<TextSpec> task;
  std::vector<TextSpec> turns;
  std::optional<TextSpec> fan_in;
  std::optional<ForEachSpec> for_each;
  std::vector<TextSpec> depends_on;  // agent ids as written
  GenerationSpec generation;
  std::optional<int> max_retries;
  std::optional<std::int64_t> timeout_ms;
  // output_schema: where it is written (set when present), and its compact JSON text in
  // the written key order (set by check_output_schemas once it compiled).
  std::optional<std::string> output_schema_pointer;
  std::string output_schema;
  std::vector<TextSpec> tools;  // tool names as written
  std::optional<int> max_tool_calls;
  std::optional<std::int64_t> tool_timeout_ms;
  std::optional<TextSpec> tool_choice;  // "auto" | "required"
  std::vector<AgentSpec> children;
};

struct WorkflowSpec {
  std::string name;
  std::string tenant = "default";
  std::string description;
  std::vector<InputSpec> inputs;
  GenerationSpec default_generation;
  std::optional<int> default_max_retries;
  std::optional<std::int64_t> default_timeout_ms;
  std::vector<PrefixSrc> prefixes;
  std::vector<AgentSpec> agents;
};

}  // namespace arbor::workflows

// Template: a task text with {{variables}}, compiled once at load time and rendered by
// the agent runtime when the values exist. Variables:
//   {{inputs.NAME}}   a workflow input (final value after command-line overrides)
//   {{item}} {{index}} the fan-out element and its 0-based position (for_each agents
//                     and their descendants; the nearest for_each wins)
//   {{outputs.ID}}    the output of agent ID (all instances joined when ID fans out)
//   {{outputs.ID.PATH}} a value inside agent ID's structured output (its output_schema
//                     document), PATH as in json_path.hpp: {{outputs.planner.tasks}},
//                     {{outputs.planner.tasks[0].title}}
//   {{item.PATH}}     a value inside the fan-out element, when the element is a JSON
//                     value (for_each.output): {{item.title}}, {{item.steps[1]}}
//   {{children}}      this agent's sub-agents' outputs, joined (fan_in and later turns)
//   {{previous}}      this agent's last output (follow-up turns)
// Rendering: {{outputs.ID}} is the output text as generated; a value reached by a PATH,
// and {{item}} when the element is a JSON value, render as the raw text of a JSON
// string and as compact JSON (keys in the order generated) for any other value.
// Load-time checks validate each PATH against the agent's output_schema; at run time a
// PATH that is absent from the actual document (an index past the end) fails the render.
// Spaces inside the braces are allowed ({{ item }}). There is no escape for a literal
// "{{": put such text in a prefix document file, which is never templated.
#pragma once

#include <cstddef>
#include <expected>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "workflows/json_path.hpp"

namespace arbor::workflows {

enum class VarKind { input, item, index, output, children, previous };

struct TemplateVar {
  VarKind kind = VarKind::item;
  std::string name;     // input name or agent id; empty for the other kinds
  std::size_t offset = 0;  // byte offset of "{{" in the source (for diagnostics)
  std::string spelling;    // "{{outputs.x}}" as written, for messages
  JsonPath path;           // item and output only: the steps after the name
};

struct ChildOutput {
  std::string id;    // agent instance id, e.g. "researcher[2]"
  std::string text;  // its final output
};

// "## <id>\n<text>" blocks joined by a blank line: the text of {{children}} and of
// {{outputs.ID}} when ID names several instances.
std::string join_outputs(const std::vector<ChildOutput>& outputs);

// Values available to a render. An absent optional means "not available here".
struct Context {
  std::map<std::string, std::string> inputs;
  std::optional<std::string> item;
  std::optional<JsonValue> item_value;  // the element as JSON (for_each.output); item = its rendering
  std::optional<std::size_t> index;
  std::map<std::string, std::string> outputs;  // keyed by the ID written in {{outputs.ID}}
  std::optional<std::vector<ChildOutput>> children;
  std::optional<std::string> previous;
};

struct TemplateError {
  std::size_t offset = 0;  // byte offset in the source
  std::string message;
};

class Template {
 public:
  Template() = default;
  // Splits `source` into text and variables; fails on "{{" without "}}", an empty or
  // unknown variable, or a malformed name. O(|source|).
  static std::expected<Template, TemplateError> compile(std::string source);

  // Substitutes every variable from `ctx`; fails (invalid_argument) naming the first
  // variable that has no value. Pure; safe to call concurrently.
  Result<std::string> render(const Context& ctx) const;
  // Like render, but a variable without a value stays as written (never fails). Used
  // to substitute {{inputs.*}} into shared prefixes at load time.
  std::string render_partial(const Context& ctx) const;

  const std::string& source() const { return source_; }
  const std::vector<TemplateVar>& variables() const { return variables_; }
  bool uses(VarKind kind) const;

 private:
  struct Piece {
    std::string text;    // literal text, when var < 0
    int var = -1;        // index into variables_
  };
  std::string source_;
  std::vector<Piece> pieces_;
  std::vector<TemplateVar> variables_;
};

}  // namespace arbor::workflows

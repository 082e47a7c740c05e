// Plan: the validated, fully resolved form of a workflow; pure data for the actors.
// Everything knowable at load time is resolved here: input values (after overrides),
// shared prefix texts (files read, {{inputs.*}} substituted), generation settings
// (built-in <- workflow defaults <- agent), fan-out expanded into instances with
// unique ids, depends_on resolved to instance ids, and each template's {{outputs.ID}}
// mapped to the instances it reads.
//
// Execution contract of one AgentPlan (the runtime implements it; workflows/ runs nothing):
//   1. wait until every agent in depends_on has finished;
//   2. if `task` is set, generate turn 0 from context = prefix text + rendered task
//      (layout task_first swaps the two; lint warns because it defeats prefix reuse);
//   3. spawn `children` (each follows this same contract) and wait for all of them; a
//      child with `dynamic` set is a template: it is first expanded (expand_dynamic,
//      dynamic_fan_out.hpp) into one instance per element of the list in its source
//      agent's output, which has finished by then (checked at load time), and none
//      for an empty list;
//   4. if `fan_in` is set, render it ({{children}} now available) as the next turn;
//   5. render each of `turns` in order as a follow-up turn of the same conversation,
//      {{previous}} = the output of the turn before.
//   With `tools`, each turn may call tools before it answers (a tool loop inside the
//   turn: actors/tool_loop.hpp); the turn's output is its final answer.
//   The agent's output is the output of its last turn. With `output_schema`, that last
//   turn is constrained to a JSON document valid against it (the earlier turns are
//   free text) and the agent fails when it is not complete. Load-time checks guarantee
//   that every variable a template uses has a value at that point and that no
//   dependency cycle (explicit or through parent/child waits) exists.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/sampling_settings.hpp"
#include "workflows/diagnostics.hpp"
#include "workflows/template.hpp"

namespace arbor::workflows {

struct InputValue {
  std::string text;                               // what {{inputs.NAME}} renders to
  std::optional<std::vector<std::string>> items;  // set for list inputs (for_each source)
};

struct PrefixSpec {
  std::string id;
  std::string system;     // system text ({{inputs.*}} substituted)
  std::string documents;  // the documents in order, "# title\n\n" headed, "\n\n" joined
  // system + "\n\n" + documents (or just one of them): byte-identical for every agent
  // that names this prefix, so its token ids (and KV pages) can be shared.
  std::string text;
};

enum class Layout { prefix_first, task_first };

// Bounds of a dynamic fan-out (for_each.output): max_children when the workflow sets
// none, and the largest it may set.
inline constexpr int kDefaultMaxChildren = 16;
inline constexpr int kMaxDynamicChildren = 1024;

// A fan-out over a list that an earlier agent writes (for_each.output): known only once
// that agent has finished.
struct DynamicFanOut {
  std::string source;     // instance id of the agent whose structured output holds the list
  std::string written;    // "planner.tasks", as written (for messages)
  JsonPath path;          // the list's place in that agent's document
  int max_children = kDefaultMaxChildren;
};

struct AgentPlan {
  std::string id;         // unique instance id: "summariser", "researcher[2]", "lead[1]/worker[0]"
  std::string spec_id;    // the id written in the workflow ("researcher")
  std::string parent_id;  // "" for a root agent
  std::string prefix_id;  // key into Plan::prefixes; "" = no shared prefix
  Layout layout = Layout::prefix_first;
  std::optional<Template> task;    // absent only for agents with children and a fan_in
  std::vector<Template> turns;     // follow-up turns, in order
  std::optional<Template> fan_in;  // set only when children is non-empty
  // defaults.generation, then the agent's; the parser checks max_tokens 1..8192,
  // temperature 0..2, top_p (0, 1], top_k 0..2^20 (workflows/parser.cpp).
  SamplingSettings generation;
  int max_retries = 1;             // 0..10
  std::int64_t timeout_ms = 120000;  // > 0, per attempt of the whole agent
  // A JSON Schema (compact text, keys in the order written: the generation order) that
  // the agent's output follows; "" = free text. Checked at load: the engine can enforce it.
  std::string output_schema;
  // Tools it may call (workflows/tools.hpp), in the order written (the order of the
  // <tools> list in its prompt), and each name's JSON pointer for diagnostics.
  // Checked against the runtime's registry when a run starts (check_agent_tools).
  std::vector<std::string> tools;
  std::vector<std::string> tool_pointers;
  int max_tool_calls = 4;              // 1..64 per attempt; then the tools are withdrawn
  std::int64_t tool_timeout_ms = 10000;  // per call; past it the model gets an error result
  bool tool_required = false;          // tool_choice "required": each turn starts with a call
  std::vector<std::string> depends_on;  // instance ids
  std::optional<std::string> item;      // fan-out element (nearest for_each ancestor-or-self)
  std::optional<std::size_t> index;
  std::optional<JsonValue> item_value;  // the element as JSON (dynamic fan-out instances)
  // Set on an un-expanded dynamic fan-out template (its id has no [i]; it never runs
  // itself). A template has no children (checked at load time).
  std::optional<DynamicFanOut> dynamic;
  // For each {{outputs.ID}} used in this agent's templates: the instance ids it reads,
  // in order (several when ID fans out; they render joined, see join_outputs).
  std::map<std::string, std::vector<std::string>> output_sources;
  std::vector<AgentPlan> children;  // sub-agents, static fan-out already expanded
};

struct Plan {
  std::string name;
  std::string tenant;
  std::string description;
  std::map<std::string, InputValue> inputs;
  std::map<std::string, PrefixSpec> prefixes;
  std::vector<AgentPlan> agents;      // root agents (usually one)
  std::vector<Diagnostic> warnings;   // lint results; the plan is valid regardless

  // Depth-first, parents before children. O(number of agents).
  void visit(const std::function<void(const AgentPlan&)>& fn) const;
  const AgentPlan* find(const std::string& id) const;
  // All instances known at load time, children included; an un-expanded dynamic
  // fan-out template counts as one (its instances are known only at run time).
  std::size_t num_agents() const;
  bool has_dynamic_fan_out() const;
};

// Builds the render context of `agent` from the outputs finished so far (keyed by
// instance id): inputs, item/index, {{outputs.ID}} values, and {{children}} once every
// child has an output. `children` = the instance ids of the sub-agents it spawned, in
// order (dynamic fan-outs expanded); nullptr = agent.children's ids. The caller sets
// `previous` for follow-up turns.
Context make_context(const Plan& plan, const AgentPlan& agent,
                     const std::map<std::string, std::string>& finished_outputs,
                     const std::vector<std::string>* children = nullptr);

}  // namespace arbor::workflows

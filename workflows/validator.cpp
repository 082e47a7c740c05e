#include "workflows/validator.hpp"

#include "workflows/parser.hpp"
#include "workflows/suggest.hpp"

namespace arbor::workflows {

namespace {

enum class Slot { task, fan_in, turn };

struct OutputRef {
  int node;
  Slot slot;
  std::string name, spelling, pointer;
  TextPosition at;
};

class Validator {
 public:
  Validator(const WorkflowSpec& spec, const std::map<std::string, InputValue>& inputs,
            const PositionIndex& index, Diagnostics& diag)
      : spec_(spec), inputs_(inputs), index_(index), diag_(diag) {}

  AgentGraph run() {
    for (const auto& a : spec_.agents) flatten(a, -1);
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) check_node(int(i));
    WaitGraph waits(g_);
    auto cycles = waits.cycles();
    for (const auto& c : cycles) {
      std::string path;
      for (const auto& a : c.agents) path += (path.empty() ? "" : " -> ") + a;
      report(diag_, index_, c.pointer,
             "dependency cycle: " + path + " (each waits for the next to finish; a sub-agent starts only "
             "after its parent starts, and a parent finishes only after its sub-agents): remove one of these dependencies");
    }
    if (cycles.empty()) check_output_refs(waits), check_dynamic_sources(waits);
    return std::move(g_);
  }

 private:
  void flatten(const AgentSpec& a, int parent) {
    int id = int(g_.nodes.size());
    AgentNode n;
    n.spec = &a;
    n.parent = parent;
    n.fan_out = a.for_each ? id : parent >= 0 ? g_.nodes[std::size_t(parent)].fan_out : -1;
    g_.nodes.push_back(std::move(n));
    if (parent >= 0) g_.nodes[std::size_t(parent)].children.push_back(id);
    if (!a.id.empty()) {
      auto [it, fresh] = g_.by_id.emplace(a.id, id);
      if (!fresh) {
        const std::string& first = g_.nodes[std::size_t(it->second)].spec->pointer;
        TextPosition at = index_.value(first);
        report(diag_, index_, a.pointer + "/id",
               "duplicate agent id '" + a.id + "' (first used by " + first + " at line " +
                   std::to_string(at.line) + "); agent ids must be unique in the workflow");
      }
    }
    for (const auto& c : a.children) flatten(c, id);
  }

  std::vector<std::string> agent_ids() const {
    std::vector<std::string> out;
    for (const auto& [id, _] : g_.by_id) out.push_back(id);
    return out;
  }

  void check_node(int i) {
    AgentNode& n = g_.nodes[std::size_t(i)];
    const AgentSpec& a = *n.spec;
    if (a.prefix) {
      bool known = false;
      std::vector<std::string> ids;
      for (const auto& p : spec_.prefixes) ids.push_back(p.id), known = known || p.id == a.prefix->text;
      if (!known)
        report(diag_, index_, a.prefix->pointer, "unknown prefix '" + a.prefix->text + "'" +
                   did_you_mean(a.prefix->text, ids) + "; declared prefixes: " + join_names(ids));
    }
    for (const auto& d : a.depends_on) {
      auto it = g_.by_id.find(d.text);
      if (it == g_.by_id.end())
        report(diag_, index_, d.pointer, "unknown agent '" + d.text + "' in depends_on" +
                   did_you_mean(d.text, agent_ids()) + "; agents: " + join_names(agent_ids()));
      else if (is_dynamic(it->second))
        report(diag_, index_, d.pointer, runtime_only(it->second, "depends_on"));
      else
        n.deps.push_back({it->second, d.pointer});
    }
    if (a.for_each && a.for_each->input) check_fan_out_input(*a.for_each);
    if (a.for_each && a.for_each->output) check_fan_out_output(i);
    if (a.task) n.task = compile(i, *a.task, Slot::task);
    if (a.fan_in) n.fan_in = compile(i, *a.fan_in, Slot::fan_in);
    for (const auto& t : a.turns)
      if (auto c = compile(i, t, Slot::turn)) n.turns.push_back(std::move(*c));
  }

  void check_fan_out_input(const ForEachSpec& fe) {
    std::string p = fe.pointer + "/input";
    const InputSpec* decl = nullptr;
    std::vector<std::string> names;
    for (const auto& in : spec_.inputs) {
      names.push_back(in.name);
      if (in.name == *fe.input) decl = &in;
    }
    if (!decl)
      return report(diag_, index_, p, "for_each names unknown input '" + *fe.input + "'" +
                        did_you_mean(*fe.input, names) + "; declared inputs: " + join_names(names));
    if (decl->type != InputType::list)
      return report(diag_, index_, p, "for_each input '" + *fe.input + "' is not a list; declare it with a list default or \"type\": \"list\"");
    auto it = inputs_.find(*fe.input);
    if (it != inputs_.end() && it->second.items && it->second.items->empty())
      report(diag_, index_, fe.pointer, "empty fan-out list: input '" + *fe.input + "' holds no items");
  }

  bool is_dynamic(int node) const {
    const auto& fe = g_.nodes[std::size_t(node)].spec->for_each;
    return fe && fe->output;
  }

  std::string runtime_only(int node, const std::string& what) const {
    const std::string& id = g_.nodes[std::size_t(node)].spec->id;
    return what + " names '" + id + "', which fans out at run time (for_each.output): its instances are not known "
           "before the run, so only its parent reads their outputs, through {{children}} in its fan_in";
  }

  // The id of an agent between `target` (included) and its common ancestor with `from`
  // (excluded) that fans out: `from` then reads several instances of `target`.
  std::string fanned_out_between(int from, int target) const {
    int lca = g_.common_ancestor(from, target);
    for (int x = target; x >= 0 && x != lca; x = g_.nodes[std::size_t(x)].parent)
      if (g_.nodes[std::size_t(x)].spec->for_each) return g_.nodes[std::size_t(x)].spec->id;
    return "";
  }

  // The output_schema of agent `node` parsed; nullptr when it has none (or it did not compile).
  const JsonValue* schema_of(int node) {
    const AgentSpec& s = *g_.nodes[std::size_t(node)].spec;
    if (s.output_schema.empty()) return nullptr;
    auto [it, fresh] = schemas_.try_emplace(node);
    if (fresh) it->second = JsonValue::parse(s.output_schema);  // compact text written by check_output_schemas
    return &it->second;
  }

  // {{outputs.ID.PATH}}: ID has an output_schema with PATH in it, and this agent reads one instance of ID.
  std::string output_path_error(int i, const TemplateVar& v) {
    int target = g_.by_id.at(v.name);
    const AgentSpec& t = *g_.nodes[std::size_t(target)].spec;
    const std::string path = path_text(v.path);
    if (!t.output_schema_pointer)
      return v.spelling + " reads '" + path.substr(path[0] == '.') + "' in the output of '" + v.name +
             "', which has no output_schema (its output is free text): give '" + v.name +
             "' an output_schema with that property, or write {{outputs." + v.name + "}}";
    const JsonValue* schema = schema_of(target);
    if (!schema) return "";  // its output_schema is reported already
    if (auto sub = schema_at(*schema, v.path); !sub)
      return v.spelling + ": not in the output_schema of '" + v.name + "': " + sub.error() +
             "; fix the path or the schema (" + *t.output_schema_pointer + ")";
    if (auto multi = fanned_out_between(i, target); !multi.empty())
      return v.spelling + ": '" + multi + "' fans out, so '" + v.name +
             "' has several outputs here and a path reads one document; write {{outputs." + v.name +
             "}} (all of them joined), or read it from inside the same fan-out branch";
    return "";
  }

  // {{item.PATH}}: the element comes from for_each.output and PATH is in its schema.
  std::string item_path_error(int i, const TemplateVar& v) {
    const AgentNode& f = g_.nodes[std::size_t(g_.nodes[std::size_t(i)].fan_out)];
    if (!f.spec->for_each->output)
      return v.spelling + ": the fan-out elements of '" + f.spec->id +
             "' are text (a literal list or a list input), not JSON values; a path applies only to elements of "
             "for_each.output; write {{item}}";
    if (f.dyn_source < 0) return "";  // for_each.output is reported already
    const JsonValue* schema = schema_of(f.dyn_source);
    JsonPath full = f.dyn_path;
    full.push_back({"", kEachElement});
    full.insert(full.end(), v.path.begin(), v.path.end());
    if (auto sub = schema_at(*schema, full); !sub)
      return v.spelling + ": not in the element schema of for_each.output '" + f.spec->for_each->output->text +
             "': " + sub.error() + "; fix the path or the output_schema of '" +
             g_.nodes[std::size_t(f.dyn_source)].spec->id + "'";
    return "";
  }

  void check_fan_out_output(int i) {
    AgentNode& n = g_.nodes[std::size_t(i)];
    const ForEachSpec& fe = *n.spec->for_each;
    const TextSpec& out = *fe.output;
    auto bad = [&](const std::string& m) { report(diag_, index_, out.pointer, m); };
    if (n.parent < 0)
      return report(diag_, index_, fe.pointer,
                    "for_each.output is only allowed in a sub-agent: its parent spawns one instance per element once "
                    "the list exists; put this agent in a parent's 'agents'");
    if (!n.spec->children.empty())
      return report(diag_, index_, fe.pointer,
                    "an agent with for_each.output cannot have sub-agents ('agents'): its instances are created at "
                    "run time; move the sub-agents to an agent of their own");
    const std::size_t cut = out.text.find_first_of(".[");
    const std::string id = out.text.substr(0, cut);
    auto path = parse_json_path(cut == std::string::npos ? "" : std::string_view(out.text).substr(cut));
    if (!path)
      return bad("malformed for_each.output '" + out.text + "': " + path.error() +
                 "; write AGENT.PATH, e.g. \"planner.tasks\"");
    auto it = g_.by_id.find(id);
    if (it == g_.by_id.end())
      return bad("unknown agent '" + id + "' in for_each.output" + did_you_mean(id, agent_ids()) +
                 "; agents: " + join_names(agent_ids()));
    const AgentSpec& src = *g_.nodes[std::size_t(it->second)].spec;
    if (!src.output_schema_pointer)
      return bad("for_each.output reads a list in the output of '" + id +
                 "', which has no output_schema (its output is free text): give '" + id +
                 "' an output_schema whose " + (path->empty() ? "root" : "'" + path_text(*path).substr(1) + "'") +
                 " is an array");
    const JsonValue* schema = schema_of(it->second);
    if (!schema) return;  // its output_schema is reported already
    if (auto why = not_a_list(*schema, *path); !why.empty())
      return bad("for_each.output '" + out.text + "' is not a list in the output_schema of '" + id + "': " + why);
    n.dyn_source = it->second;
    n.dyn_path = std::move(*path);
  }

  // The source of each for_each.output has finished when the parent spawns its sub-agents
  // (after the parent's task: what the parent waits for before it starts), and is one instance.
  void check_dynamic_sources(const WaitGraph& waits) {
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      const AgentNode& n = g_.nodes[i];
      if (n.dyn_source < 0) continue;
      const std::string& src = g_.nodes[std::size_t(n.dyn_source)].spec->id;
      const std::string& parent = g_.nodes[std::size_t(n.parent)].spec->id;
      const std::string& p = n.spec->for_each->output->pointer;
      if (!waits.finished_at_start(n.parent)[std::size_t(n.dyn_source)])
        report(diag_, index_, p,
               "for_each.output reads '" + src + "', which is not certainly finished when '" + parent +
                   "' spawns its sub-agents: add \"" + src + "\" to the depends_on of '" + parent +
                   "' (or of an agent it waits for)");
      else if (auto multi = fanned_out_between(n.parent, n.dyn_source); !multi.empty())
        report(diag_, index_, p,
               "for_each.output reads '" + src + "', but '" + multi + "' fans out, so '" + parent +
                   "' would see several lists; read the list of one agent that does not fan out");
    }
  }

  std::optional<Template> compile(int i, const TextSpec& src, Slot slot) {
    auto t = Template::compile(src.text);
    if (!t) {
      report_at(diag_, src.pointer, index_.in_string(src.pointer, t.error().offset), t.error().message);
      return std::nullopt;
    }
    const AgentNode& n = g_.nodes[std::size_t(i)];
    bool ok = true;
    for (const auto& v : t->variables()) {
      TextPosition at = index_.in_string(src.pointer, v.offset);
      auto bad = [&](std::string message) {
        report_at(diag_, src.pointer, at, std::move(message));
        ok = false;
      };
      switch (v.kind) {
        case VarKind::input:
          if (!inputs_declared(v.name)) {
            std::vector<std::string> names;
            for (const auto& in : spec_.inputs) names.push_back(in.name);
            bad("unknown input '" + v.name + "' in " + v.spelling + did_you_mean(v.name, names) +
                "; declared inputs: " + join_names(names));
          }
          break;
        case VarKind::item:
        case VarKind::index:
          if (n.fan_out < 0)
            bad(v.spelling + " is only defined in an agent with for_each or in its sub-agents");
          else if (!v.path.empty())
            if (auto e = item_path_error(i, v); !e.empty()) bad(e);
          break;
        case VarKind::children:
          if (n.children.empty()) bad("{{children}} is only defined in an agent with sub-agents ('agents')");
          else if (slot == Slot::task) bad("{{children}} is not available in 'task' (it runs before the sub-agents); use it in 'fan_in'");
          break;
        case VarKind::previous:
          if (slot == Slot::task || (slot == Slot::fan_in && !n.spec->task))
            bad("{{previous}} is not available here: the agent has produced no output yet; use it in 'turns'" +
                std::string(slot == Slot::fan_in ? " (or give the agent a 'task')" : ""));
          break;
        case VarKind::output:
          if (!g_.by_id.count(v.name))
            bad("unknown agent '" + v.name + "' in " + v.spelling + did_you_mean(v.name, agent_ids()) +
                "; agents: " + join_names(agent_ids()));
          else if (is_dynamic(g_.by_id.at(v.name)))
            bad(runtime_only(g_.by_id.at(v.name), v.spelling));
          else if (auto e = v.path.empty() ? "" : output_path_error(i, v); !e.empty())
            bad(e);
          else
            refs_.push_back({i, slot, v.name, v.spelling, src.pointer, at});
          break;
      }
    }
    return ok ? std::optional<Template>(std::move(*t)) : std::nullopt;
  }

  bool inputs_declared(const std::string& name) const {
    for (const auto& in : spec_.inputs)
      if (in.name == name) return true;
    return false;
  }

  void check_output_refs(const WaitGraph& waits) {
    for (const auto& r : refs_) {
      const AgentNode& n = g_.nodes[std::size_t(r.node)];
      bool after_children = r.slot == Slot::fan_in || (r.slot == Slot::turn && !n.children.empty());
      auto finished = after_children ? waits.finished_at_fan_in(r.node) : waits.finished_at_start(r.node);
      if (finished[std::size_t(g_.by_id.at(r.name))]) continue;
      report_at(diag_, r.pointer, r.at,
                r.spelling + " is not available here: agent '" + n.spec->id + "' does not wait for '" + r.name +
                    "' to finish; add \"" + r.name + "\" to its depends_on (or read a sub-agent's output in fan_in)");
    }
  }

  const WorkflowSpec& spec_;
  const std::map<std::string, InputValue>& inputs_;
  const PositionIndex& index_;
  Diagnostics& diag_;
  AgentGraph g_;
  std::vector<OutputRef> refs_;
  std::map<int, JsonValue> schemas_;  // parsed output_schemas, by node
};

}  // namespace

AgentGraph validate_agents(const WorkflowSpec& spec, const std::map<std::string, InputValue>& inputs,
                           const PositionIndex& index, Diagnostics& diag) {
  return Validator(spec, inputs, index, diag).run();
}

}  // namespace arbor::workflows

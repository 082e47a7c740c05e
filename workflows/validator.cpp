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
    if (cycles.empty()) check_output_refs(waits);
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
      else
        n.deps.push_back({it->second, d.pointer});
    }
    if (a.for_each && a.for_each->input) check_fan_out_input(*a.for_each);
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
};

}  // namespace

AgentGraph validate_agents(const WorkflowSpec& spec, const std::map<std::string, InputValue>& inputs,
                           const PositionIndex& index, Diagnostics& diag) {
  return Validator(spec, inputs, index, diag).run();
}

}  // namespace arbor::workflows

#include "workflows/plan_builder.hpp"

#include "workflows/parser.hpp"

namespace arbor::workflows {

namespace {

SamplingSettings merge(SamplingSettings g, const GenerationSpec& s) {
  if (s.max_tokens) g.max_tokens = *s.max_tokens;
  if (s.temperature) g.temperature = *s.temperature;
  if (s.top_p) g.top_p = *s.top_p;
  if (s.top_k) g.top_k = *s.top_k;
  if (s.seed) g.seed = *s.seed;
  if (s.stop) g.stop = *s.stop;
  return g;
}

struct Instance {
  int node;
  std::string id;
  std::map<int, std::string> chain;  // spec node -> instance id, for self and ancestors
};

class Builder {
 public:
  Builder(const WorkflowSpec& spec, const AgentGraph& graph, const Plan& plan)
      : spec_(spec), g_(graph), plan_(plan), by_node_(graph.nodes.size()) {}

  std::size_t count(int node) const {
    const AgentNode& n = g_.nodes[std::size_t(node)];
    std::size_t sub = 1;
    for (int c : n.children) sub += count(c);
    if (n.dyn_source >= 0) return std::size_t(max_children(n));  // at most, at run time
    return items(n).size() * sub;
  }

  std::vector<AgentPlan> build() {
    std::vector<AgentPlan> roots;
    for (std::size_t i = 0; i < g_.nodes.size(); ++i)
      if (g_.nodes[i].parent < 0) expand(int(i), nullptr, roots);
    for (auto& r : roots) resolve(r);
    return roots;
  }

 private:
  static int max_children(const AgentNode& n) {
    return n.spec->for_each->max_children.value_or(kDefaultMaxChildren);
  }

  // The fan-out items of a node; one empty item when it does not fan out, or when it
  // fans out at run time (the plan keeps one template).
  std::vector<std::optional<std::string>> items(const AgentNode& n) const {
    const auto& fe = n.spec->for_each;
    if (!fe || n.dyn_source >= 0) return {std::nullopt};
    const auto& list = fe->input ? *plan_.inputs.at(*fe->input).items : fe->items;
    return {list.begin(), list.end()};
  }

  void expand(int node, const Instance* parent, std::vector<AgentPlan>& out) {
    const AgentNode& n = g_.nodes[std::size_t(node)];
    const AgentSpec& s = *n.spec;
    auto list = items(n);
    // Ids are "spec_id" or "spec_id[i]", qualified by the parent instance once an
    // ancestor fans out, so every instance id is unique.
    bool qualify = parent && g_.nodes[std::size_t(n.parent)].fan_out >= 0;
    for (std::size_t i = 0; i < list.size(); ++i) {
      AgentPlan a;
      if (qualify) a.id = parent->id + "/";
      a.id += s.id;
      if (s.for_each && n.dyn_source < 0) a.id += '[' + std::to_string(i) + ']';
      a.spec_id = s.id;
      a.parent_id = parent ? parent->id : "";
      a.prefix_id = s.prefix ? s.prefix->text : "";
      a.layout = s.layout == "task_first" ? Layout::task_first : Layout::prefix_first;
      a.task = n.task;
      a.turns = n.turns;
      a.fan_in = n.fan_in;
      a.generation = merge(merge(SamplingSettings{}, spec_.default_generation), s.generation);
      a.max_retries = s.max_retries.value_or(spec_.default_max_retries.value_or(a.max_retries));
      a.timeout_ms = s.timeout_ms.value_or(spec_.default_timeout_ms.value_or(a.timeout_ms));
      a.output_schema = s.output_schema;
      for (const auto& t : s.tools) a.tools.push_back(t.text), a.tool_pointers.push_back(t.pointer);
      a.max_tool_calls = s.max_tool_calls.value_or(a.max_tool_calls);
      a.tool_timeout_ms = s.tool_timeout_ms.value_or(a.tool_timeout_ms);
      a.tool_required = s.tool_choice && s.tool_choice->text == "required";
      if (n.dyn_source >= 0)
        a.dynamic = DynamicFanOut{"", s.for_each->output->text, n.dyn_path, max_children(n)};
      else if (s.for_each) a.item = list[i], a.index = i;
      else if (parent) a.item = parent_item_, a.index = parent_index_;
      Instance inst{node, a.id, parent ? parent->chain : std::map<int, std::string>{}};
      inst.chain[node] = a.id;
      where_[a.id] = {node, by_node_[std::size_t(node)].size()};
      by_node_[std::size_t(node)].push_back(inst);
      auto saved = std::pair(parent_item_, parent_index_);
      parent_item_ = a.item, parent_index_ = a.index;
      for (int c : n.children) expand(c, &inst, a.children);
      std::tie(parent_item_, parent_index_) = saved;
      out.push_back(std::move(a));
    }
  }

  // Instances of `target` that agent instance `d` refers to: those in the same branch
  // of the nearest common fanned-out ancestor, all of them when there is none.
  std::vector<std::string> resolve_ref(const Instance& d, int target) const {
    int lca = g_.common_ancestor(d.node, target);
    std::vector<std::string> out;
    for (const auto& t : by_node_[std::size_t(target)])
      if (lca < 0 || t.chain.at(lca) == d.chain.at(lca)) out.push_back(t.id);
    return out;
  }

  void resolve(AgentPlan& a) {
    const Instance& d = find_instance(a.id);
    const AgentNode& n = g_.nodes[std::size_t(d.node)];
    for (const auto& dep : n.deps)
      for (auto& id : resolve_ref(d, dep.node)) a.depends_on.push_back(id);
    if (a.dynamic) a.dynamic->source = resolve_ref(d, n.dyn_source).at(0);  // one instance: validated
    auto scan = [&](const Template& t) {
      for (const auto& v : t.variables())
        if (v.kind == VarKind::output && !a.output_sources.count(v.name))
          a.output_sources[v.name] = resolve_ref(d, g_.by_id.at(v.name));
    };
    if (a.task) scan(*a.task);
    if (a.fan_in) scan(*a.fan_in);
    for (const auto& t : a.turns) scan(t);
    for (auto& c : a.children) resolve(c);
  }

  const Instance& find_instance(const std::string& id) const {
    auto [node, i] = where_.at(id);  // every AgentPlan was registered by expand()
    return by_node_[std::size_t(node)][i];
  }

  const WorkflowSpec& spec_;
  const AgentGraph& g_;
  const Plan& plan_;
  std::vector<std::vector<Instance>> by_node_;
  std::map<std::string, std::pair<int, std::size_t>> where_;  // instance id -> by_node_ slot
  std::optional<std::string> parent_item_;
  std::optional<std::size_t> parent_index_;
};

}  // namespace

void build_agents(const WorkflowSpec& spec, const AgentGraph& graph, Plan& plan,
                  const PositionIndex& index, Diagnostics& diag) {
  Builder b(spec, graph, plan);
  std::size_t total = 0;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i)
    if (graph.nodes[i].parent < 0) total += b.count(int(i));
  if (total > kMaxAgentInstances) {
    report(diag, index, "/agents", "the workflow expands to " + std::to_string(total) +
                                       " agent instances (limit " + std::to_string(kMaxAgentInstances) +
                                       "; a for_each.output counts as its max_children); shorten the for_each lists");
    return;
  }
  plan.agents = b.build();
}

}  // namespace arbor::workflows

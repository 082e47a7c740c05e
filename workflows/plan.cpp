#include "workflows/plan.hpp"

namespace arbor::workflows {

namespace {
void visit_agent(const AgentPlan& a, const std::function<void(const AgentPlan&)>& fn) {
  fn(a);
  for (const auto& c : a.children) visit_agent(c, fn);
}
}  // namespace

void Plan::visit(const std::function<void(const AgentPlan&)>& fn) const {
  for (const auto& a : agents) visit_agent(a, fn);
}

const AgentPlan* Plan::find(const std::string& id) const {
  const AgentPlan* found = nullptr;
  visit([&](const AgentPlan& a) {
    if (!found && a.id == id) found = &a;
  });
  return found;
}

std::size_t Plan::num_agents() const {
  std::size_t n = 0;
  visit([&](const AgentPlan&) { ++n; });
  return n;
}

bool Plan::has_dynamic_fan_out() const {
  bool any = false;
  visit([&](const AgentPlan& a) { any = any || a.dynamic.has_value(); });
  return any;
}

Context make_context(const Plan& plan, const AgentPlan& agent,
                     const std::map<std::string, std::string>& finished,
                     const std::vector<std::string>* spawned) {
  Context ctx;
  for (const auto& [name, value] : plan.inputs) ctx.inputs[name] = value.text;
  ctx.item = agent.item;
  ctx.index = agent.index;
  ctx.item_value = agent.item_value;
  for (const auto& [ref, ids] : agent.output_sources) {
    std::vector<ChildOutput> parts;
    for (const auto& id : ids)
      if (auto it = finished.find(id); it != finished.end()) parts.push_back({id, it->second});
    if (parts.size() != ids.size()) continue;  // not all finished: render reports it
    // A fan-out agent (instance ids end in ']') always renders joined, even with one item.
    bool single = ids.size() == 1 && ids[0].back() != ']';
    ctx.outputs[ref] = single ? parts[0].text : join_outputs(parts);
  }
  if (!agent.children.empty()) {
    std::vector<std::string> ids;
    if (spawned) ids = *spawned;
    else
      for (const auto& c : agent.children) ids.push_back(c.id);
    std::vector<ChildOutput> children;
    for (const auto& id : ids)
      if (auto it = finished.find(id); it != finished.end()) children.push_back({id, it->second});
    if (children.size() == ids.size()) ctx.children = std::move(children);
  }
  return ctx;
}

}  // namespace arbor::workflows

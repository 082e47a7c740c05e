#include "workflows/lint.hpp"

#include <map>

namespace arbor::workflows {

namespace {

void warn(Plan& plan, const PositionIndex& index, const std::string& pointer, TextPosition at,
          std::string message) {
  plan.warnings.push_back({Severity::warning, pointer, at.line, at.column, std::move(message)});
}

void lint_prefix_text(Plan& plan, const PositionIndex& index, const std::string& prefix_id,
                      const std::string& text, const std::string& pointer) {
  auto t = Template::compile(text);
  if (!t) return;
  for (const auto& v : t->variables()) {
    if (v.kind == VarKind::input) continue;
    warn(plan, index, pointer, index.in_string(pointer, v.offset),
         "shared prefix '" + prefix_id + "' contains the per-agent variable " + v.spelling +
             ": a prefix must be identical for every agent that reads it, so it is sent literally; "
             "move it into the agent's task (KV rule 6: SharedPrefix + TaskSuffix)");
  }
}

}  // namespace

void lint_plan(const WorkflowSpec& spec, const PositionIndex& index, Plan& plan) {
  std::map<std::string, std::vector<std::string>> users;  // prefix id -> agent instances
  plan.visit([&](const AgentPlan& a) {
    if (a.prefix_id.empty()) return;
    users[a.prefix_id].push_back(a.id);
    if (a.dynamic) users[a.prefix_id].push_back(a.id + "[1]");  // a template stands for its instances
  });
  std::map<std::string, const AgentSpec*> reported_layout;
  plan.visit([&](const AgentPlan& a) {
    if (a.layout != Layout::task_first || reported_layout.count(a.spec_id)) return;
    reported_layout[a.spec_id] = nullptr;
    std::function<const AgentSpec*(const std::vector<AgentSpec>&)> find =
        [&](const std::vector<AgentSpec>& list) -> const AgentSpec* {
      for (const auto& s : list) {
        if (s.id == a.spec_id) return &s;
        if (auto* c = find(s.children)) return c;
      }
      return nullptr;
    };
    const AgentSpec* s = find(spec.agents);
    std::string p = s ? s->layout_pointer : "/agents";
    warn(plan, index, p, index.value(p),
         "agent '" + a.spec_id + "' puts its task before the shared prefix" +
             (a.prefix_id.empty() ? "" : " '" + a.prefix_id + "'") +
             ": its tokens diverge from every other agent's at position 0, so no cached prefix is reused; "
             "use \"prefix_first\" (KV rule 6)");
  });
  for (const auto& src : spec.prefixes) {
    if (src.system) lint_prefix_text(plan, index, src.id, src.system->text, src.system->pointer);
    for (const auto& d : src.documents)
      if (d.text) lint_prefix_text(plan, index, src.id, *d.text, d.pointer + "/text");
    auto it = users.find(src.id);
    std::size_t n = it == users.end() ? 0 : it->second.size();
    if (n == 0)
      warn(plan, index, src.pointer, index.key(src.pointer),
           "shared prefix '" + src.id + "' is not used by any agent; remove it or name it in an agent's 'prefix'");
    else if (n == 1)
      warn(plan, index, src.pointer, index.key(src.pointer),
           "shared prefix '" + src.id + "' is used by only one agent ('" + it->second[0] +
               "'): nothing shares its cached pages; share it between agents or fold it into that agent");
  }
}

}  // namespace arbor::workflows

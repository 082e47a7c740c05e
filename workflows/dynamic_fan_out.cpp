#include "workflows/dynamic_fan_out.hpp"

namespace arbor::workflows {

Result<std::vector<AgentPlan>> expand_dynamic(const AgentPlan& tmpl, const std::string& source_output) {
  const DynamicFanOut& d = *tmpl.dynamic;
  auto where = "for_each.output '" + d.written + "' of '" + tmpl.id + "'";
  auto doc = JsonValue::parse(source_output, nullptr, false);
  if (doc.is_discarded())
    return fail(ErrorCode::invalid_argument, where + ": the output of '" + d.source + "' is not a JSON document");
  auto list = find_in(doc, d.path);
  if (!list) return fail(ErrorCode::invalid_argument, where + ": " + list.error() + " in the output of '" + d.source + "'");
  if (!(*list)->is_array())
    return fail(ErrorCode::invalid_argument, where + ": the value in the output of '" + d.source + "' is not a list");
  const std::size_t n = (*list)->size();
  if (n > std::size_t(d.max_children))
    return fail(ErrorCode::invalid_argument,
                where + ": '" + d.source + "' wrote " + std::to_string(n) + " items, more than max_children " +
                    std::to_string(d.max_children) +
                    "; raise for_each.max_children or bound the list with maxItems in its output_schema");
  std::vector<AgentPlan> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    AgentPlan a = tmpl;
    a.dynamic.reset();
    a.id = tmpl.id + "[" + std::to_string(i) + "]";
    a.item_value = (**list)[i];
    a.item = render_json_value(*a.item_value);
    a.index = i;
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace arbor::workflows

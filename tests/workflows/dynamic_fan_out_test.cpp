// Dynamic fan-out (for_each.output) and template paths into structured outputs, at load
// time: the plan keeps one template per dynamic fan-out, and every wrong path or source
// is an error at its JSON pointer saying what is wrong and how to fix it. At run time
// (expand_dynamic): one instance per element, none for an empty list, a clear error
// past max_children.
#include "workflows/dynamic_fan_out.hpp"

#include <gtest/gtest.h>

#include "workflow_test_util.hpp"

namespace arbor::workflows {
namespace {

using testing::errors_of;
using testing::load;

// A diagnostic at `pointer` whose message contains every one of `parts`.
void expect_error(const Diagnostics& d, const std::string& pointer, std::initializer_list<std::string> parts) {
  for (const auto& item : d.items()) {
    if (item.pointer != pointer) continue;
    bool all = true;
    for (const auto& p : parts) all = all && item.message.find(p) != std::string::npos;
    if (all) return;
  }
  ADD_FAILURE() << "no diagnostic at " << pointer << " with the expected words; got:\n" << d.format();
}

const std::string kPlannerSchema =
    R"({"type": "object", "properties": {"tasks": {"type": "array", "maxItems": 4, "items":
         {"type": "object", "properties": {"title": {"type": "string"}, "steps": {"type": "array", "items": {"type": "string"}}},
          "required": ["title"]}}, "note": {"type": "string"}}, "required": ["tasks"]})";

// planner + lead (depends on it) fanning out `worker` over planner.tasks; the pieces vary.
std::string workflow(const std::string& for_each, const std::string& worker_task,
                     const std::string& fan_in = "{{children}}", const std::string& lead_deps = R"(["planner"])",
                     const std::string& planner_schema = kPlannerSchema) {
  return R"({"name": "x", "prefixes": {"p": {"system": "Be brief."}}, "agents": [
  {"id": "planner", "task": "Plan.")" +
         (planner_schema.empty() ? "" : ", \"output_schema\": " + planner_schema) + R"(},
  {"id": "lead", "prefix": "p", "depends_on": )" + lead_deps + R"(, "fan_in": ")" + fan_in + R"(", "agents": [
    {"id": "worker", "prefix": "p", "for_each": )" + for_each + R"(, "task": ")" + worker_task + R"("}]}]})";
}

TEST(DynamicFanOut, ThePlanKeepsOneTemplateWithItsSourceAndBound) {
  auto plan = load(workflow(R"({"output": "planner.tasks", "max_children": 3})",
                            "Do {{item.title}}, step {{item.steps[0]}} ({{index}}; {{outputs.planner.note}})",
                            "{{children}} after {{outputs.planner.tasks[0].title}}"));
  ASSERT_TRUE(plan) << plan.error().format();
  const AgentPlan* lead = plan->find("lead");
  ASSERT_NE(lead, nullptr);
  ASSERT_EQ(lead->children.size(), 1u);
  const AgentPlan& t = lead->children[0];
  EXPECT_EQ(t.id, "worker");
  ASSERT_TRUE(t.dynamic.has_value());
  EXPECT_EQ(t.dynamic->source, "planner");
  EXPECT_EQ(t.dynamic->written, "planner.tasks");
  EXPECT_EQ(path_text(t.dynamic->path), ".tasks");
  EXPECT_EQ(t.dynamic->max_children, 3);
  EXPECT_FALSE(t.item.has_value());
  EXPECT_EQ(plan->num_agents(), 3u);
  EXPECT_TRUE(plan->has_dynamic_fan_out());
  // Unset max_children: the documented default.
  auto d = load(workflow(R"({"output": "planner.tasks"})", "{{item}}"));
  ASSERT_TRUE(d) << d.error().format();
  EXPECT_EQ(d->find("worker")->dynamic->max_children, kDefaultMaxChildren);
}

TEST(DynamicFanOut, UnderAStaticFanOutEachParentInstanceHasItsTemplate) {
  auto plan = load(R"({"name": "x", "agents": [
  {"id": "planner", "task": "p", "output_schema": {"type": "array", "items": {"type": "string"}}},
  {"id": "team", "for_each": ["x", "y"], "depends_on": ["planner"], "fan_in": "{{children}}", "agents": [
    {"id": "w", "for_each": {"output": "planner"}, "task": "{{item}} for {{index}}"}]}]})");
  ASSERT_TRUE(plan) << plan.error().format();
  for (const char* team : {"team[0]", "team[1]"}) {
    const AgentPlan* t = plan->find(team);
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->children.size(), 1u);
    const AgentPlan& w = t->children[0];
    EXPECT_EQ(w.id, std::string(team) + "/w");
    EXPECT_EQ(w.dynamic->source, "planner");
    EXPECT_TRUE(w.dynamic->path.empty());
    auto inst = expand_dynamic(w, R"(["a","b"])");
    ASSERT_TRUE(inst);
    EXPECT_EQ((*inst)[1].id, std::string(team) + "/w[1]");
    EXPECT_EQ(*(*inst)[1].task->render(make_context(*plan, (*inst)[1], {})), "b for 1");
  }
}

TEST(DynamicFanOut, ExpandsOneInstancePerElementNoneForAnEmptyListAndFailsPastMaxChildren) {
  auto plan = load(workflow(R"({"output": "planner.tasks", "max_children": 2})", "Do {{item.title}} as {{item}}"));
  ASSERT_TRUE(plan) << plan.error().format();
  const AgentPlan& t = plan->find("lead")->children[0];
  auto two = expand_dynamic(t, R"({"tasks": [{"title": "a"}, {"title": "b", "steps": ["s"]}]})");
  ASSERT_TRUE(two) << two.error().message;
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1].id, "worker[1]");
  EXPECT_EQ((*two)[1].index, 1u);
  EXPECT_EQ((*two)[1].item, R"({"title":"b","steps":["s"]})");
  EXPECT_FALSE((*two)[1].dynamic.has_value());
  Context ctx = make_context(*plan, (*two)[1], {});
  EXPECT_EQ(*t.task->render(ctx), R"(Do b as {"title":"b","steps":["s"]})");
  EXPECT_TRUE(expand_dynamic(t, R"({"tasks": []})")->empty());
  auto three = expand_dynamic(t, R"({"tasks": [{"title": "a"}, {"title": "b"}, {"title": "c"}]})");
  ASSERT_FALSE(three);
  EXPECT_EQ(three.error().message,
            "for_each.output 'planner.tasks' of 'worker': 'planner' wrote 3 items, more than max_children 2; "
            "raise for_each.max_children or bound the list with maxItems in its output_schema");
  auto absent = expand_dynamic(t, R"({"note": "no tasks"})");
  ASSERT_FALSE(absent);
  EXPECT_NE(absent.error().message.find("the document has no property 'tasks'"), std::string::npos)
      << absent.error().message;
}

TEST(DynamicFanOut, AStringItemRendersRawAndAPathAbsentAtRunTimeFailsTheRender) {
  auto plan = load(workflow(R"({"output": "planner.tasks"})", "{{item.steps[1]}}",
                            "{{outputs.planner.tasks[1].title}}"));
  ASSERT_TRUE(plan) << plan.error().format();
  const AgentPlan* lead = plan->find("lead");
  auto inst = expand_dynamic(lead->children[0], R"({"tasks": [{"title": "only", "steps": ["one"]}]})");
  ASSERT_TRUE(inst);
  auto r = (*inst)[0].task->render(make_context(*plan, (*inst)[0], {}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message,
            "template variable {{item.steps[1]}} has no value: index 1 is past the end of 'steps' (1 element)");
  Context ctx = make_context(*plan, *lead, {{"planner", R"({"tasks": [{"title": "a b"}]})"}});
  auto f = lead->fan_in->render(ctx);
  ASSERT_FALSE(f);
  EXPECT_EQ(f.error().message,
            "template variable {{outputs.planner.tasks[1].title}} has no value: index 1 is past the end of "
            "'tasks' (1 element)");
  ctx.outputs["planner"] = R"({"tasks": [{"title": "a b"}, {"title": "c \"d\""}]})";
  EXPECT_EQ(*lead->fan_in->render(ctx), "c \"d\"");
}

TEST(DynamicFanOut, TemplatePathsAreCheckedAgainstTheOutputSchema) {
  auto d = errors_of(workflow(R"({"output": "planner.tasks"})", "{{item.titel}} {{outputs.planner.tasks[9]}}",
                              "{{children}} {{outputs.planner.nope}}"));
  expect_error(d, "/agents/1/agents/0/task",
               {"{{item.titel}}", "element schema of for_each.output 'planner.tasks'", "no property 'titel'",
                "properties: title, steps"});
  expect_error(d, "/agents/1/agents/0/task",
               {"{{outputs.planner.tasks[9]}}", "output_schema of 'planner'", "index 9 is past", "maxItems (4)"});
  expect_error(d, "/agents/1/fan_in",
               {"{{outputs.planner.nope}}", "no property 'nope'", "fix the path or the schema"});
  EXPECT_EQ(d.num_errors(), 3u) << d.format();
}

TEST(DynamicFanOut, APathIntoFreeTextOrIntoLiteralItemsIsAnError) {
  auto d = errors_of(workflow(R"({"output": "planner.tasks"})", "{{item}}", "{{children}} {{outputs.planner.tasks}}",
                              R"(["planner"])", ""));
  expect_error(d, "/agents/1/agents/0/for_each/output", {"'planner'", "has no output_schema", "give 'planner' an output_schema"});
  expect_error(d, "/agents/1/fan_in", {"{{outputs.planner.tasks}}", "no output_schema", "or write {{outputs.planner}}"});
  auto s = errors_of(R"({"name": "x", "agents": [{"id": "w", "for_each": ["a"], "task": "{{item.title}}"}]})");
  expect_error(s, "/agents/0/task", {"{{item.title}}", "are text", "write {{item}}"});
  auto m = errors_of(R"({"name": "x", "agents": [{"id": "w", "task": "{{item.}} {{outputs.a[x]}}"}]})");
  expect_error(m, "/agents/0/task", {"malformed path in {{item.}}", "property name"});
}

TEST(DynamicFanOut, TheSourceMustBeAListThatHasFinishedBeforeTheParentSpawns) {
  // Not waited for: the lead does not depend on the planner.
  auto d = errors_of(workflow(R"({"output": "planner.tasks"})", "{{item}}", "{{children}}", "[]"));
  expect_error(d, "/agents/1/agents/0/for_each/output",
               {"not certainly finished when 'lead' spawns", "add \"planner\" to the depends_on of 'lead'"});
  // Not a list, unknown agent, malformed.
  expect_error(errors_of(workflow(R"({"output": "planner.note"})", "{{item}}")), "/agents/1/agents/0/for_each/output",
               {"'planner.note' is not a list", "/properties/note is not an array"});
  expect_error(errors_of(workflow(R"({"output": "planer.tasks"})", "{{item}}")), "/agents/1/agents/0/for_each/output",
               {"unknown agent 'planer'", "did you mean 'planner'"});
  expect_error(errors_of(workflow(R"({"output": "planner.tasks[x]"})", "{{item}}")),
               "/agents/1/agents/0/for_each/output", {"malformed for_each.output", "AGENT.PATH"});
  expect_error(errors_of(workflow(R"({"output": "planner.tasks", "max_children": 0})", "{{item}}")),
               "/agents/1/agents/0/for_each/max_children", {"1..1024"});
}

TEST(DynamicFanOut, ItsInstancesAreReadOnlyThroughTheParentsChildren) {
  // Root placement, depends_on / {{outputs}} of the template from elsewhere.
  auto d = errors_of(R"({"name": "x", "agents": [
  {"id": "planner", "task": "p", "output_schema": {"type": "array", "items": {"type": "string"}}},
  {"id": "solo", "depends_on": ["planner"], "for_each": {"output": "planner"}, "task": "{{item}}"},
  {"id": "lead", "depends_on": ["planner"], "fan_in": "{{children}}", "agents": [
    {"id": "w", "for_each": {"output": "planner"}, "task": "{{item}}"}]},
  {"id": "after", "depends_on": ["lead", "w"], "task": "{{outputs.w}}"}]})");
  expect_error(d, "/agents/1/for_each", {"only allowed in a sub-agent"});
  expect_error(d, "/agents/3/depends_on/1", {"'w'", "fans out at run time", "{{children}}"});
  expect_error(d, "/agents/3/task", {"{{outputs.w}}", "fans out at run time"});
}

}  // namespace
}  // namespace arbor::workflows

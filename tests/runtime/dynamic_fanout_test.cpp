// Dynamic fan-out on the real model and actors (issue 11 section 2): a planner writes a
// list in its structured output and the lead spawns one worker per element at run
// time (for_each.output). The planner's output_schema pins the list (const), so its
// constrained output is known. Cases: 0, 1 and many workers, past max_children, the
// shared prefix computed once for the dynamic workers, the reports listing every
// instance, and equal outputs with and without the prefix cache (greedy decoding).
#include <gtest/gtest.h>

#include "runtime_test_util.hpp"

namespace arbor::testing {
namespace {

constexpr std::size_t kPage = 16;  // small_config's page size

// planner (its list pinned to `tasks`) -> lead (no task: warms the shared prefix) ->
// worker per task; the lead's fan_in reads {{children}} and a path into the plan.
std::string dynamic_workflow(const nlohmann::json& tasks, std::optional<int> max_children = std::nullopt,
                             const std::string& fan_in = "Sections:\n{{children}}\nPlan: {{outputs.planner.tasks}}\nSay done.") {
  nlohmann::json for_each = {{"output", "planner.tasks"}};
  if (max_children) for_each["max_children"] = *max_children;
  nlohmann::json tasks_schema = {
      {"type", "array"},
      {"items", {{"type", "object"}, {"properties", {{"title", {{"type", "string"}}}}}, {"required", {"title"}}}},
      {"const", tasks}};
  nlohmann::json wf = {
      {"name", "dynamic"},
      {"tenant", "dyn"},
      {"defaults", {{"generation", {{"max_tokens", 4}, {"temperature", 0}}}}},
      {"prefixes", {{"p", {{"system", long_system("rivers", 16)}}}}},
      {"agents",
       {{{"id", "planner"},
         {"task", "Write the plan as JSON: a list of tasks, each with a title."},
         {"output_schema",
          {{"type", "object"}, {"properties", {{"tasks", tasks_schema}}}, {"required", {"tasks"}},
           {"additionalProperties", false}}},
         {"generation", {{"max_tokens", 64}}}},
        {{"id", "lead"},
         {"prefix", "p"},
         {"depends_on", {"planner"}},
         {"agents",
          {{{"id", "worker"}, {"prefix", "p"}, {"for_each", for_each}, {"task", "Write about {{item.title}}."}}}},
         {"fan_in", fan_in}}}}};
  return wf.dump();
}

nlohmann::json titles(std::initializer_list<const char*> names) {
  nlohmann::json out = nlohmann::json::array();
  for (const char* n : names) out.push_back({{"title", n}});
  return out;
}

std::vector<std::string> ids_of(const RunResult& r) {
  std::vector<std::string> out;
  for (const auto& a : r.agents) out.push_back(a.id);
  return out;
}

class DynamicFanOut : public CleanRuntimeTest {};

TEST_F(DynamicFanOut, ManyWorkersOneEachShareThePrefixComputedOnce) {
  const RunResult r = run_text(*rt_, dynamic_workflow(titles({"a", "the longest mountain ranges", "b"})));
  ASSERT_EQ(r.status, RunStatus::ok) << to_json(r);
  EXPECT_EQ(ids_of(r), (std::vector<std::string>{"planner", "lead", "worker[0]", "worker[1]", "worker[2]"}));
  const AgentResult* lead = agent(r, "lead");
  ASSERT_NE(lead, nullptr);
  EXPECT_FALSE(lead->output.empty());
  const std::size_t prefix = lead->warmup_tokens;  // the lead prefilled the shared prefix once
  ASSERT_GT(prefix, 100u);
  std::size_t worker_computed = 0;
  for (int i = 0; i < 3; ++i) {
    const AgentResult* w = agent(r, "worker[" + std::to_string(i) + "]");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->status, AgentStatus::ok) << w->error;
    EXPECT_EQ(w->parent, "lead");
    EXPECT_GE(w->cached_tokens, prefix / kPage * kPage) << w->id;  // read from the cache, not computed
    worker_computed += w->computed_tokens;
  }
  EXPECT_LT(worker_computed, prefix);  // three workers computed less than one copy of the prefix
  // Each worker's task holds its own element ({{item.title}}): the long title, a longer prompt.
  EXPECT_GT(agent(r, "worker[1]")->prompt_tokens, agent(r, "worker[0]")->prompt_tokens + 2);
  EXPECT_EQ(agent(r, "worker[0]")->prompt_tokens, agent(r, "worker[2]")->prompt_tokens);
}

TEST_F(DynamicFanOut, OneWorker) {
  const RunResult r = run_text(*rt_, dynamic_workflow(titles({"a"})));
  ASSERT_EQ(r.status, RunStatus::ok) << to_json(r);
  EXPECT_EQ(ids_of(r), (std::vector<std::string>{"planner", "lead", "worker[0]"}));
  EXPECT_EQ(agent(r, "worker[0]")->status, AgentStatus::ok);
}

TEST_F(DynamicFanOut, AnEmptyListSpawnsNoWorkerAndTheParentStillCompletes) {
  const RunResult r = run_text(*rt_, dynamic_workflow(nlohmann::json::array()));
  ASSERT_EQ(r.status, RunStatus::ok) << to_json(r);
  EXPECT_EQ(ids_of(r), (std::vector<std::string>{"planner", "lead"}));
  ASSERT_TRUE(agent(r, "planner")->json.has_value());
  EXPECT_EQ(*agent(r, "planner")->json, nlohmann::ordered_json::parse(R"({"tasks":[]})"));
  EXPECT_EQ(agent(r, "lead")->status, AgentStatus::ok);
  EXPECT_GT(agent(r, "lead")->generated_tokens, 0u);  // its fan_in ran, over no children
}

TEST_F(DynamicFanOut, PastMaxChildrenTheParentFailsNamingTheLimitAndTheCount) {
  const RunResult r = run_text(*rt_, dynamic_workflow(titles({"a", "b", "c"}), 2));
  ASSERT_EQ(r.status, RunStatus::failed);
  EXPECT_EQ(agent(r, "planner")->status, AgentStatus::ok);
  const AgentResult* lead = agent(r, "lead");
  ASSERT_NE(lead, nullptr);
  EXPECT_EQ(lead->status, AgentStatus::failed);
  EXPECT_NE(lead->error.find("for_each.output 'planner.tasks' of 'worker': 'planner' wrote 3 items, more than "
                             "max_children 2"),
            std::string::npos)
      << lead->error;
  EXPECT_NE(r.error.find("max_children 2"), std::string::npos) << r.error;
  EXPECT_EQ(ids_of(r), (std::vector<std::string>{"planner", "lead"}));  // nothing was spawned
}

TEST_F(DynamicFanOut, APathAbsentFromTheActualDocumentFailsTheAgentThatReadsIt) {
  const RunResult r =
      run_text(*rt_, dynamic_workflow(titles({"a"}), std::nullopt, "{{children}} then {{outputs.planner.tasks[1].title}}"));
  ASSERT_EQ(r.status, RunStatus::failed);
  EXPECT_EQ(agent(r, "worker[0]")->status, AgentStatus::ok);
  const AgentResult* lead = agent(r, "lead");
  EXPECT_EQ(lead->status, AgentStatus::failed);
  EXPECT_EQ(lead->error, "agent 'lead': template variable {{outputs.planner.tasks[1].title}} has no value: index 1 is "
                         "past the end of 'tasks' (1 element)");
}

TEST(DynamicFanOutCache, OutputsAreEqualWithAndWithoutThePrefixCache) {
  std::map<std::string, std::string> outputs[2];
  for (int caching = 0; caching < 2; ++caching) {
    RuntimeConfig c = small_config();
    c.prefix_caching = caching == 1;
    auto rt = make_runtime(c);
    ASSERT_TRUE(rt);
    const RunResult r = run_text(*rt, dynamic_workflow(titles({"a", "b", "c"})));
    ASSERT_EQ(r.status, RunStatus::ok) << to_json(r);
    for (const auto& a : r.agents) outputs[caching][a.id] = a.output;
    expect_clean(*rt);
  }
  EXPECT_EQ(outputs[0].size(), 5u);
  EXPECT_EQ(outputs[0], outputs[1]);
}

TEST_F(DynamicFanOut, ThePlannerExampleRunsWithTheDefaultModel) {
  auto j = nlohmann::json::parse(read_text(kExamples + "/planner.json"));
  j["defaults"]["generation"]["max_tokens"] = 4;  // the writers and the lead; the planner keeps its budget
  j["agents"][1]["generation"]["max_tokens"] = 4;
  const RunResult r = run_text(*rt_, j.dump());
  ASSERT_EQ(r.status, RunStatus::ok) << to_json(r);
  const AgentResult* planner = agent(r, "planner");
  ASSERT_TRUE(planner && planner->json.has_value());
  const std::size_t n = (*planner->json)["tasks"].size();
  EXPECT_GE(n, 2u);
  EXPECT_LE(n, 4u);
  EXPECT_EQ(r.agents.size(), 2 + n);
  for (std::size_t i = 0; i < n; ++i) {
    const AgentResult* w = agent(r, "writer[" + std::to_string(i) + "]");
    ASSERT_NE(w, nullptr) << i;
    EXPECT_EQ(w->status, AgentStatus::ok) << w->error;
    EXPECT_GT(w->cached_tokens, 0u) << w->id;  // the style guide came from the cache
  }
}

}  // namespace
}  // namespace arbor::testing

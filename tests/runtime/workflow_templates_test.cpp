// Validation and run time agree on templates: every output a validated template reads
// has a value when it renders (real model, a few tokens per agent).
#include <gtest/gtest.h>

#include "runtime_test_util.hpp"

namespace arbor::testing {
namespace {

class WorkflowTemplates : public CleanRuntimeTest {
 protected:
  // Runs `agents` (a JSON array) and expects every agent to finish "ok".
  RunResult run_ok(const std::string& agents) {
    const std::string wf = R"({"name": "t", "defaults": {"generation": {"max_tokens": 3}}, "agents": )" + agents + "}";
    RunResult r = run_text(*rt_, wf);
    EXPECT_EQ(r.status, RunStatus::ok) << to_json(r);
    for (const auto& a : r.agents) EXPECT_EQ(a.status, AgentStatus::ok) << a.id << ": " << a.error;
    return r;
  }
};

TEST_F(WorkflowTemplates, PreviousInAFanInAfterATaskIsTheTasksOutput) {
  const auto r = run_ok(R"([{"id": "lead", "task": "Name a colour.", "fan_in": "You said {{previous}}. Team: {{children}}",
                              "agents": [{"id": "w", "task": "Name a fruit."}]}])");
  ASSERT_EQ(r.agents.size(), 2u);
  // The fan_in turn continues the task's conversation: more prompt than the task alone.
  EXPECT_GT(agent(r, "lead")->prompt_tokens, agent(r, "w")->prompt_tokens);
}

TEST_F(WorkflowTemplates, OutputsOfIndirectDependenciesAreReadable) {
  run_ok(R"([{"id": "a", "task": "Name a colour."},
             {"id": "b", "depends_on": ["a"], "task": "Say: {{outputs.a}}"},
             {"id": "c", "depends_on": ["b"], "task": "Repeat: {{outputs.a}} and {{outputs.b}}"}])");
}

TEST_F(WorkflowTemplates, OutputsOfAParentsDependencyAndOfASubAgentsSubAgent) {
  run_ok(R"([{"id": "a", "task": "Name a colour."},
             {"id": "c", "depends_on": ["a"], "task": "Plan for {{outputs.a}}.",
              "fan_in": "Before: {{previous}}. Now: {{children}} and {{outputs.g}}",
              "agents": [{"id": "k", "task": "Echo {{outputs.a}}", "agents": [{"id": "g", "task": "Say hi to {{outputs.a}}."}]}]}])");
}

TEST_F(WorkflowTemplates, FanOutInstancesReadTheirDependenciesTransitively) {
  const auto r = run_ok(R"([{"id": "a", "task": "Name a colour."},
             {"id": "b", "depends_on": ["a"], "task": "Say {{outputs.a}}"},
             {"id": "w", "for_each": ["x", "y"], "depends_on": ["b"], "task": "{{item}}: {{outputs.a}}"}])");
  EXPECT_EQ(r.agents.size(), 4u);
}

}  // namespace
}  // namespace arbor::testing

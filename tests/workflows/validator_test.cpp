// Cross-reference errors: ids, prefixes, dependencies, cycles, template scopes.
#include "workflows/validator.hpp"

#include <gtest/gtest.h>

#include "workflow_test_util.hpp"

namespace arbor::workflows {
namespace {

using testing::errors_of;
using testing::expect_diag;
using testing::load;

TEST(Validator, DuplicateAgentIdsAcrossNestingLevels) {
  auto d = errors_of(R"({"name": "x", "agents": [
  {"id": "a", "fan_in": "{{children}}", "agents": [{"id": "b", "task": "t"}]},
  {"id": "b", "task": "t"}]})");
  expect_diag(d, "/agents/1/id", 3, 10, "duplicate agent id 'b' (first used by /agents/0/agents/0 at line 2)");
}

TEST(Validator, UnknownPrefixAndAgentReferences) {
  auto d = errors_of(R"({"name": "x", "prefixes": {"background": {"system": "s"}}, "agents": [
  {"id": "writer", "prefix": "backgruond", "task": "t"},
  {"id": "editor", "prefix": "background", "depends_on": ["writter"], "task": "{{outputs.writr}}"}]})");
  expect_diag(d, "/agents/0/prefix", 2, 30, "unknown prefix 'backgruond' (did you mean 'background'?)");
  expect_diag(d, "/agents/1/depends_on/0", 3, 59, "unknown agent 'writter' in depends_on (did you mean 'writer'?)");
  expect_diag(d, "/agents/1/task", 3, 80, "unknown agent 'writr' in {{outputs.writr}} (did you mean 'writer'?)");
}

TEST(Validator, CycleIsNamed) {
  auto d = errors_of(R"({"name": "x", "agents": [
  {"id": "a", "task": "t", "depends_on": ["c"]},
  {"id": "b", "task": "t", "depends_on": ["a"]},
  {"id": "c", "task": "t", "depends_on": ["b"]}]})");
  ASSERT_EQ(d.num_errors(), 1u) << d.format();
  expect_diag(d, "/agents/0/depends_on/0", 2, 43, "dependency cycle: a -> c -> b -> a");
}

TEST(Validator, SelfDependencyIsACycle) {
  auto d = errors_of(R"({"name": "x", "agents": [{"id": "a", "task": "t", "depends_on": ["a"]}]})");
  expect_diag(d, "/agents/0/depends_on/0", 1, 66, "dependency cycle: a -> a");
}

TEST(Validator, DependingOnAnAncestorOrDescendantDeadlocks) {
  // The child waits for its parent to finish; the parent waits for its children.
  auto up = errors_of(R"({"name": "x", "agents": [
  {"id": "p", "fan_in": "f", "agents": [{"id": "c", "task": "t", "depends_on": ["p"]}]}]})");
  expect_diag(up, "/agents/0/agents/0/depends_on/0", 2, 81, "dependency cycle: c -> p -> c");
  // The parent's start waits for a child that it alone can spawn.
  auto down = errors_of(R"({"name": "x", "agents": [
  {"id": "p", "fan_in": "f", "depends_on": ["c"], "agents": [{"id": "c", "task": "t"}]}]})");
  expect_diag(down, "/agents/0/depends_on/0", 2, 45, "dependency cycle: p -> c -> p");
}

TEST(Validator, CycleThroughANestedAgent) {
  // x waits for y; y waits for c; c is x's child, so it starts only after x starts.
  auto d = errors_of(R"({"name": "x", "agents": [
  {"id": "x", "depends_on": ["y"], "fan_in": "f", "agents": [{"id": "c", "task": "t"}]},
  {"id": "y", "depends_on": ["c"], "task": "t"}]})");
  expect_diag(d, "/agents/0/depends_on/0", 2, 30, "dependency cycle: x -> y -> c -> x");
}

TEST(Validator, TemplateVariableScopes) {
  auto d = errors_of(R"({"name": "x", "inputs": {"topic": {"default": "t"}}, "agents": [
  {"id": "a", "task": "{{inputs.topik}} {{item}} {{previous}} {{children}}"},
  {"id": "p", "fan_in": "{{previous}}", "agents": [{"id": "c", "task": "{{children}}"}]},
  {"id": "q", "task": "{{children}}", "agents": [{"id": "k", "task": "x"}]}]})");
  expect_diag(d, "/agents/0/task", 2, 24, "unknown input 'topik' in {{inputs.topik}} (did you mean 'topic'?)");
  expect_diag(d, "/agents/0/task", 2, 41, "{{item}} is only defined in an agent with for_each");
  expect_diag(d, "/agents/0/task", 2, 50, "{{previous}} is not available here");
  expect_diag(d, "/agents/0/task", 2, 63, "{{children}} is only defined in an agent with sub-agents");
  expect_diag(d, "/agents/1/fan_in", 3, 26, "{{previous}} is not available here");
  expect_diag(d, "/agents/1/agents/0/task", 3, 73, "{{children}} is only defined in an agent with sub-agents");
  expect_diag(d, "/agents/2/task", 4, 24, "{{children}} is not available in 'task'");
  EXPECT_EQ(d.num_errors(), 7u) << d.format();
}

TEST(Validator, TemplateSyntaxErrorsAreLocatedInsideTheString) {
  auto d = errors_of(R"({"name": "x", "agents": [{"id": "a", "task": "line\nnext {{item"}]})");
  // The raw string has "\n" (two characters) before "next ".
  expect_diag(d, "/agents/0/task", 1, 58, "'{{' is never closed");
}

TEST(Validator, OutputsMustBeFinishedWhenRead) {
  auto d = errors_of(R"({"name": "x", "agents": [
  {"id": "a", "task": "t"},
  {"id": "b", "task": "{{outputs.a}}"}]})");
  expect_diag(d, "/agents/1/task", 3, 24, "{{outputs.a}} is not available here: agent 'b' does not wait for 'a'");
}

TEST(Validator, OutputsAvailableThroughDependenciesAndChildren) {
  auto r = load(R"({"name": "x", "agents": [
  {"id": "a", "task": "t"},
  {"id": "b", "depends_on": ["a"], "task": "{{outputs.a}}"},
  {"id": "c", "depends_on": ["b"], "task": "{{outputs.a}} {{outputs.b}}",
   "turns": ["{{outputs.w}} {{previous}}"], "agents": [{"id": "w", "task": "{{outputs.a}}"}]}]})");
  ASSERT_TRUE(r.has_value()) << r.error().format();
  // But a child's output is not ready in its parent's task.
  auto d = errors_of(R"({"name": "x", "agents": [
  {"id": "p", "task": "{{outputs.w}}", "agents": [{"id": "w", "task": "t"}]}]})");
  expect_diag(d, "/agents/0/task", 2, 24, "{{outputs.w}} is not available here");
}

TEST(Validator, FanOutInputMustBeANonEmptyList) {
  auto d = errors_of(R"({"name": "x", "inputs": {"s": {"default": "x"}, "l": {"type": "list"}},
  "agents": [{"id": "a", "task": "{{item}}", "for_each": {"input": "s"}},
             {"id": "b", "task": "{{item}}", "for_each": {"input": "nope"}},
             {"id": "c", "task": "{{item}}", "for_each": {"input": "l"}}]})",
                     {{"l", "[]"}});
  expect_diag(d, "/agents/0/for_each/input", 2, 68, "for_each input 's' is not a list");
  expect_diag(d, "/agents/1/for_each/input", 3, 68, "for_each names unknown input 'nope'");
  expect_diag(d, "/agents/2/for_each", 4, 58, "empty fan-out list: input 'l' holds no items");
}

TEST(Validator, MissingPrefixFileIsRelativeToTheWorkflow) {
  auto d = errors_of(R"({"name": "x", "prefixes": {"p": {"documents": [{"file": "docs/missing.md"}]}},
  "agents": [{"id": "a", "prefix": "p", "task": "t"}, {"id": "b", "prefix": "p", "task": "t"}]})");
  expect_diag(d, "/prefixes/p/documents/0/file", 1, 57, "prefix document 'docs/missing.md' (resolved to " +
                                                           testing::kExamplesDir + "/docs/missing.md)");
}

TEST(Validator, AllErrorsAreReportedNotJustTheFirst) {
  auto d = errors_of(R"({"name": "x", "agents": [
  {"id": "a", "task": "{{nope}}", "max_retries": 99, "prefix": "missing"},
  {"id": "a", "task": "t", "depends_on": ["zzz"]}]})");
  EXPECT_EQ(d.num_errors(), 5u) << d.format();
}

}  // namespace
}  // namespace arbor::workflows

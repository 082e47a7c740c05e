// One mistake gives one error: later stages do not report the same mistake again in
// other (contradictory or misleading) words.
#include <gtest/gtest.h>

#include "workflow_test_util.hpp"

namespace arbor::workflows {
namespace {

using testing::errors_of;
using testing::expect_diag;

TEST(OneMistakeOneError, MissingInputIsNotAlsoUnknown) {
  // Used in a prefix system text, a prefix document and a task: the value is missing,
  // the input is declared; one error says so.
  auto d = errors_of(R"({"name": "x", "inputs": {"topic": {"type": "string"}},
  "prefixes": {"p": {"system": "About {{inputs.topic}}.", "documents": [{"text": "On {{inputs.topic}}"}]}},
  "agents": [{"id": "a", "prefix": "p", "task": "Write about {{inputs.topic}}."}]})");
  ASSERT_EQ(d.num_errors(), 1u) << d.format();
  expect_diag(d, "/inputs/topic", 1, 35, "input 'topic' has no default: pass --input topic=VALUE");
  EXPECT_EQ(d.format().find("unknown input"), std::string::npos) << d.format();
  // A real typo is still unknown.
  auto typo = errors_of(R"({"name": "x", "inputs": {"topic": {"default": "t"}},
  "prefixes": {"p": {"system": "About {{inputs.topik}}."}},
  "agents": [{"id": "a", "prefix": "p", "task": "t"}]})");
  expect_diag(typo, "/prefixes/p/system", 2, 39, "unknown input 'topik' in {{inputs.topik}} (did you mean 'topic'?)");
}

TEST(OneMistakeOneError, StringDependsOnIsOneErrorWithTheFix) {
  auto d = errors_of(R"({"name": "x", "agents": [
  {"id": "a", "task": "t"},
  {"id": "b", "depends_on": "a", "task": "Use {{outputs.a}}."}]})");
  ASSERT_EQ(d.num_errors(), 1u) << d.format();
  expect_diag(d, "/agents/1/depends_on", 3, 29,
              "expected an array of agent ids, got a string; write \"depends_on\": [\"a\"]");
  // An unknown id in that string is a second, different mistake.
  auto unknown = errors_of(R"({"name": "x", "agents": [{"id": "a", "task": "t"}, {"id": "b", "depends_on": "zz", "task": "t"}]})");
  EXPECT_EQ(unknown.num_errors(), 2u) << unknown.format();
}

TEST(OneMistakeOneError, ValidationAcceptsWhatTheRunProvides) {
  // {{previous}} in a fan_in after a task, and the output of an indirect dependency
  // (a -> b -> c), of a parent's dependency, and of a sub-agent's sub-agent: each is
  // finished when the template renders (tests/runtime/workflow_templates_test.cpp runs them).
  auto r = testing::load(R"({"name": "x", "agents": [
  {"id": "a", "task": "t"},
  {"id": "b", "depends_on": ["a"], "task": "{{outputs.a}}"},
  {"id": "c", "depends_on": ["b"], "task": "{{outputs.a}}", "fan_in": "{{previous}} {{outputs.g}}",
   "agents": [{"id": "k", "task": "{{outputs.a}}", "agents": [{"id": "g", "task": "t"}]}]}]})");
  ASSERT_TRUE(r.has_value()) << r.error().format();
}

}  // namespace
}  // namespace arbor::workflows

// The agents' output_schema at load time: a schema the engine can enforce reaches the
// plan (every instance of a fanned-out agent, keys in the order written); one it cannot
// enforce is an error at each offending keyword's own JSON pointer.
#include "workflows/output_schema.hpp"

#include <gtest/gtest.h>

#include "workflow_test_util.hpp"

namespace arbor::workflows {
namespace {

using testing::errors_of;
using testing::expect_diag;
using testing::load;

TEST(OutputSchema, AnEnforceableSchemaReachesEveryInstanceInTheOrderWritten) {
  auto plan = load(R"({"name": "x", "agents": [
  {"id": "lead", "fan_in": "{{children}}", "agents": [
    {"id": "w", "for_each": ["a", "b", "c"], "task": "{{item}}",
     "output_schema": {"type": "object", "properties": {"zeta": {"type": "integer"}, "alpha": {"enum": ["x", "y"]}},
                       "required": ["zeta", "alpha"]}}]}]})");
  ASSERT_TRUE(plan) << plan.error().format();
  const auto& lead = plan->agents.at(0);
  EXPECT_EQ(lead.output_schema, "");
  ASSERT_EQ(lead.children.size(), 3u);
  for (const auto& w : lead.children)
    EXPECT_EQ(w.output_schema,
              R"({"type":"object","properties":{"zeta":{"type":"integer"},"alpha":{"enum":["x","y"]}},"required":["zeta","alpha"]})");
}

TEST(OutputSchema, EveryKeywordTheEngineCannotEnforceIsAnErrorAtItsPointer) {
  auto d = errors_of(R"({"name": "x", "agents": [
  {"id": "a", "task": "t", "output_schema": {"type": "object", "properties": {
     "n": {"type": "integer", "multipleOf": 3},
     "tags": {"type": "array", "uniqueItems": true}}}}]})");
  expect_diag(d, "/agents/0/output_schema/properties/n/multipleOf", 3, 45, "multipleOf");
  expect_diag(d, "/agents/0/output_schema/properties/tags/uniqueItems", 4, 47, "uniqueItems");
}

TEST(OutputSchema, AMalformedSchemaOrANonObjectIsAnError) {
  auto d = errors_of(R"({"name": "x", "agents": [
  {"id": "a", "task": "t", "output_schema": {"type": "objekt"}},
  {"id": "b", "task": "t", "output_schema": "json"}]})");
  ASSERT_EQ(d.num_errors(), 2u) << d.format();
  expect_diag(d, "/agents/0/output_schema/type", 2, 54, "objekt");
  expect_diag(d, "/agents/1/output_schema", 3, 45, "expected a JSON Schema object, got a string");
}

}  // namespace
}  // namespace arbor::workflows

// Shape errors: syntax, types, unknown and missing fields, ranges, duplicate keys.
#include "workflows/parser.hpp"

#include <gtest/gtest.h>

#include "workflow_test_util.hpp"

namespace arbor::workflows {
namespace {

using testing::errors_of;
using testing::expect_diag;
using testing::load;

TEST(Parser, SyntaxErrorHasLineAndColumn) {
  auto d = errors_of("{\n  \"name\": \"x\",\n  \"agents\": [,]\n}\n");
  ASSERT_EQ(d.num_errors(), 1u);
  expect_diag(d, "", 3, 14, "invalid JSON");
  EXPECT_EQ(d.format().substr(0, 15), "wf.json:3:14: (");
}

TEST(Parser, EmptyTextIsASyntaxError) {
  auto d = errors_of("");
  ASSERT_EQ(d.num_errors(), 1u);
  EXPECT_NE(d.items()[0].message.find("invalid JSON"), std::string::npos);
}

TEST(Parser, WrongTypesAreReportedAtTheValue) {
  auto d = errors_of(R"({
  "name": 5,
  "agents": [{"id": "a", "task": ["x"], "turns": "y"}]
})");
  expect_diag(d, "/name", 2, 11, "expected a string, got an integer");
  expect_diag(d, "/agents/0/task", 3, 34, "expected a string, got an array");
  expect_diag(d, "/agents/0/turns", 3, 50, "expected an array of strings, got a string");
}

TEST(Parser, UnknownFieldSuggestsClosestNameAtTheKey) {
  auto d = errors_of(R"({
  "name": "x",
  "agents": [{"id": "a", "task": "t", "dependson": []}],
  "prefixs": {}
})");
  expect_diag(d, "/agents/0/dependson", 3, 39, "unknown field 'dependson' (did you mean 'depends_on'?)");
  expect_diag(d, "/prefixs", 4, 3, "(did you mean 'prefixes'?)");
}

TEST(Parser, MissingRequiredFields) {
  auto d = errors_of(R"({
  "agents": [{"task": "t"}, {"id": "b"}]
})");
  expect_diag(d, "", 1, 1, "missing required field 'name'");
  expect_diag(d, "/agents/0", 2, 14, "missing required field 'id'");
  expect_diag(d, "/agents/1", 2, 29, "missing required field 'task'");
}

// Values the parser refused before issue 13 and the shared ranges accept (the CLI and
// the embedding API did): max_tokens 0 (prefill only) and above 8192, temperature above
// 2, top_p 0.
TEST(Parser, SamplingRangesAreTheSharedOnes) {
  auto r = load(R"({"name": "x", "agents": [{"id": "a", "task": "t",
    "generation": {"temperature": 2.5, "top_p": 0, "max_tokens": 0, "top_k": 1048576}}]})");
  ASSERT_TRUE(r.has_value()) << r.error().format();
  const SamplingSettings& g = r->agents[0].generation;
  EXPECT_EQ(g.max_tokens, 0);
  EXPECT_DOUBLE_EQ(g.temperature, 2.5);
  EXPECT_DOUBLE_EQ(g.top_p, 0.0);
  EXPECT_EQ(g.top_k, 1048576);
}

TEST(Parser, OutOfRangeNumbers) {
  auto d = errors_of(R"({
  "name": "x",
  "defaults": {"max_retries": 11, "timeout_ms": 0},
  "agents": [{"id": "a", "task": "t",
    "generation": {"temperature": 100.5, "top_p": 1.5, "max_tokens": 1048577, "top_k": -1},
    "timeout_ms": -5, "max_retries": -1}]
})");
  expect_diag(d, "/defaults/max_retries", 3, 31, "max_retries must be an integer in 0..10, got 11");
  expect_diag(d, "/defaults/timeout_ms", 3, 49, "timeout_ms must be an integer > 0");
  // Ranges: the one check_sampling (common/sampling_settings.hpp), widened to the union
  // of the front ends' old ranges in issue 13 (max_tokens 8193, temperature 2.5, top_p 0 now pass).
  expect_diag(d, "/agents/0/generation/temperature", 5, 35, "temperature must be in 0..100 (got 100.5)");
  expect_diag(d, "/agents/0/generation/top_p", 5, 51, "top_p must be in 0..1 (got 1.5)");
  expect_diag(d, "/agents/0/generation/max_tokens", 5, 70, "max_tokens must be in 0..1048576 (got 1048577)");
  expect_diag(d, "/agents/0/generation/top_k", 5, 88, "top_k must be in 0..1048576 (got -1; 0 = off)");
  expect_diag(d, "/agents/0/timeout_ms", 6, 19, "timeout_ms must be an integer > 0");
  expect_diag(d, "/agents/0/max_retries", 6, 38, "max_retries must be an integer in 0..10, got -1");
  EXPECT_EQ(d.num_errors(), 8u) << d.format();
}

TEST(Parser, BoundaryValuesAreAccepted) {
  auto r = load(R"({"name": "x", "agents": [{"id": "a", "task": "t", "max_retries": 10, "timeout_ms": 1,
    "generation": {"temperature": 2, "top_p": 1, "max_tokens": 8192, "top_k": 0, "seed": 0}},
    {"id": "b", "task": "t", "max_retries": 0, "generation": {"temperature": 0, "max_tokens": 1, "top_p": 0.01}}]})");
  ASSERT_TRUE(r.has_value()) << r.error().format();
}

TEST(Parser, IntegerFieldsRejectFractions) {
  auto d = errors_of(R"({"name": "x", "agents": [{"id": "a", "task": "t", "generation": {"max_tokens": 3.5}}]})");
  expect_diag(d, "/agents/0/generation/max_tokens", 1, 80, "expected an integer, got a number");
}

TEST(Parser, DuplicateKeysAreErrors) {
  auto d = errors_of(R"({"name": "x", "name": "y", "agents": [{"id": "a", "task": "t"}]})");
  expect_diag(d, "/name", 1, 15, "duplicate key");
}

TEST(Parser, EmptyFanOutListAndBadItems) {
  auto d = errors_of(R"({"name": "x", "agents": [
  {"id": "a", "task": "{{item}}", "for_each": []},
  {"id": "b", "task": "{{item}}", "for_each": [1, {"x": 1}]},
  {"id": "c", "task": "{{item}}", "for_each": "nope"}]})");
  expect_diag(d, "/agents/0/for_each", 2, 47, "empty fan-out list");
  expect_diag(d, "/agents/1/for_each/1", 3, 51, "for_each items must be strings or numbers");
  expect_diag(d, "/agents/2/for_each", 4, 47,
              "expected a list of items, {\"input\": \"NAME\"} or {\"output\": \"AGENT.PATH\"}");
}

TEST(Parser, FanInNeedsChildrenAndDocumentsNeedOneSource) {
  auto d = errors_of(R"({"name": "x",
  "prefixes": {"p": {"documents": [{"text": "a", "file": "b"}]}, "q": {}},
  "agents": [{"id": "a", "task": "t", "fan_in": "f", "prefix": "p"}]})");
  expect_diag(d, "/prefixes/p/documents/0", 2, 36, "exactly one of 'text' (inline) or 'file'");
  expect_diag(d, "/prefixes/q", 2, 71, "prefix 'q' is empty");
  expect_diag(d, "/agents/0/fan_in", 3, 49, "fan_in needs sub-agents");
}

TEST(Parser, InputDeclarations) {
  auto d = errors_of(R"({"name": "x",
  "inputs": {"a": {}, "b": {"type": "list", "default": "s"}, "c": {"type": "colour"}, "9d": {"default": 1}},
  "agents": [{"id": "a", "task": "t"}]})");
  expect_diag(d, "/inputs/a", 2, 19, "needs a 'default' or a 'type'");
  expect_diag(d, "/inputs/b/default", 2, 56, "does not match the declared type 'list'");
  expect_diag(d, "/inputs/c/type", 2, 76, "unknown input type 'colour'");
  expect_diag(d, "/inputs/9d", 2, 87, "input name '9d'");
}

}  // namespace
}  // namespace arbor::workflows

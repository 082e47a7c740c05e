// Workflow text no loader should choke on: numbers outside the double range, nesting
// far deeper than any stack, other encodings, broken UTF-8, truncation. Each is one
// clear diagnostic with line:column, never an exception, abort or stack overflow.
#include <gtest/gtest.h>

#include "workflow_test_util.hpp"

namespace arbor::workflows {
namespace {

using testing::errors_of;
using testing::expect_diag;

const std::string kValidTail = R"("agents": [{"id": "a", "task": "t"}]})";

TEST(WorkflowHostileText, NumberOutsideTheDoubleRangeIsOneError) {
  auto d = errors_of("{\"name\": \"x\",\n \"defaults\": {\"max_retries\": 1e999},\n " + kValidTail);
  ASSERT_EQ(d.num_errors(), 1u) << d.format();
  expect_diag(d, "", 2, 30, "invalid JSON: number 1e999 is out of range");
  EXPECT_EQ(d.format().find("json.exception"), std::string::npos) << d.format();
}

TEST(WorkflowHostileText, DeepNestingUnderAnyFieldIsOneErrorNotACrash) {
  const std::string deep = std::string(20'000, '[') + std::string(20'000, ']');
  for (const char* field : {"description", "name", "tenant", "prefixes", "defaults"}) {
    auto d = errors_of(std::string("{\"") + field + "\": " + deep + ", \"name2\": 1, " + kValidTail);
    ASSERT_EQ(d.num_errors(), 1u) << field << ": " << d.format();
    EXPECT_NE(d.items()[0].message.find("nested more than 64 levels"), std::string::npos) << d.format();
    EXPECT_EQ(d.items()[0].line, 1);
  }
  const std::string inputs = R"({"name": "x", "inputs": {"l": {"default": )" + std::string(100'000, '[') +
                             std::string(100'000, ']') + "}}, " + kValidTail;
  auto d = errors_of(inputs);
  ASSERT_EQ(d.num_errors(), 1u);
  EXPECT_NE(d.items()[0].message.find("64 levels"), std::string::npos);
  // Within the limit, a nested default is an ordinary type error, located.
  auto ok_depth = errors_of(R"({"name": "x", "inputs": {"l": {"default": [[[1]]]}}, )" + kValidTail);
  expect_diag(ok_depth, "/inputs/l/default/0", 1, 44, "list items must be strings or numbers, got an array");
}

TEST(WorkflowHostileText, OtherEncodingsAreNamed) {
  const std::string utf8 = "{\"name\": \"x\", " + kValidTail;
  std::string le = "\xFF\xFE", be = "\xFE\xFF";
  for (char c : utf8) le += c, le += '\0', be += '\0', be += c;
  auto d = errors_of(le);
  ASSERT_EQ(d.num_errors(), 1u);
  expect_diag(d, "", 1, 1, "the text is UTF-16 little-endian (byte order mark FF FE)");
  expect_diag(errors_of(be), "", 1, 1, "the text is UTF-16 big-endian (byte order mark FE FF)");
  expect_diag(errors_of("\xEF\xBB\xBF\xEF\xBB\xBF" + utf8), "", 1, 1, "two UTF-8 byte order marks");
  // One UTF-8 byte order mark is accepted.
  EXPECT_TRUE(testing::load("\xEF\xBB\xBF" + utf8).has_value());
}

TEST(WorkflowHostileText, BrokenUtf8AndTruncationAreLocated) {
  auto d = errors_of("{\"name\": \"caf\xC3\", " + kValidTail);
  ASSERT_EQ(d.num_errors(), 1u);
  EXPECT_NE(d.items()[0].message.find("UTF-8"), std::string::npos) << d.format();
  EXPECT_NE(d.items()[0].message.find("\\xC3"), std::string::npos) << d.format();
  auto t = errors_of("{\"name\": \"x\",\n \"agents\": [{\"id\": \"a\"");
  ASSERT_EQ(t.num_errors(), 1u);
  EXPECT_EQ(t.items()[0].line, 2);
  EXPECT_NE(t.items()[0].message.find("unexpected end of input"), std::string::npos) << t.format();
}

TEST(WorkflowHostileText, ListInputGivenAsDeepJsonIsAnInputError) {
  auto d = errors_of(R"({"name": "x", "inputs": {"l": {"type": "list"}},
  "agents": [{"id": "a", "task": "{{item}}", "for_each": {"input": "l"}}]})",
                     {{"l", std::string(100'000, '[')}});
  ASSERT_EQ(d.num_errors(), 1u) << d.format();
  EXPECT_NE(d.items()[0].message.find("--input l="), std::string::npos);
  EXPECT_NE(d.items()[0].message.find("64 levels"), std::string::npos) << d.format();
}

}  // namespace
}  // namespace arbor::workflows

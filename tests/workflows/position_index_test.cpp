#include "workflows/position_index.hpp"

#include <gtest/gtest.h>

namespace arbor::workflows {
namespace {

TEST(PositionIndex, MapsValuesAndKeysToLineColumn) {
  const std::string text =
      "{\n"
      "  \"a\": [1, {\"b\": \"x\"}],\n"
      "  \"c/d\": true\n"
      "}\n";
  auto idx = PositionIndex::build(text);
  EXPECT_EQ(idx.value("").line, 1);
  EXPECT_EQ(idx.value("").column, 1);
  EXPECT_EQ(idx.value("/a").line, 2);
  EXPECT_EQ(idx.value("/a").column, 8);
  EXPECT_EQ(idx.value("/a/0").column, 9);
  EXPECT_EQ(idx.value("/a/1").column, 12);
  EXPECT_EQ(idx.value("/a/1/b").column, 18);
  EXPECT_EQ(idx.key("/a/1/b").column, 13);
  EXPECT_EQ(idx.key("/c~1d").line, 3);
  EXPECT_EQ(idx.key("/c~1d").column, 3);
  EXPECT_EQ(idx.value("/c~1d").column, 10);
}

TEST(PositionIndex, UnknownPointerFallsBackToNearestAncestor) {
  auto idx = PositionIndex::build("{\"x\": {\n  \"y\": 1}}");
  TextPosition p = idx.value("/x/missing/deeper");
  EXPECT_EQ(p.line, 1);
  EXPECT_EQ(p.column, 7);
}

TEST(PositionIndex, ColumnsCountCodePointsAndStringOffsetsWalkEscapes) {
  // "é" is two bytes; \n inside the string is two raw characters for one decoded byte.
  const std::string text = "{\"é\": \"ab\\n{{x}}\"}";
  auto idx = PositionIndex::build(text);
  EXPECT_EQ(idx.value("/é").column, 7);
  // Decoded "ab\n{{x}}": "{{" is at decoded offset 3, raw column 7 + 1 + 4 = 12.
  EXPECT_EQ(idx.in_string("/é", 3).column, 12);
}

TEST(PositionIndex, EscapedKeysAndDuplicates) {
  auto idx = PositionIndex::build("{\"a\\u0062\": 1, \"k\": 1, \"k\": 2}");
  EXPECT_EQ(idx.value("/ab").column, 13);
  ASSERT_EQ(idx.duplicate_keys().size(), 1u);
  EXPECT_EQ(idx.duplicate_keys()[0], "/k");
  EXPECT_EQ(idx.value("/k").column, 29);  // the last one, which the parser keeps
}

TEST(PositionIndex, PointerTokensAreEscaped) {
  EXPECT_EQ(pointer_append("/a", "x~y/z"), "/a/x~0y~1z");
  EXPECT_EQ(pointer_append("", std::size_t(3)), "/3");
}

}  // namespace
}  // namespace arbor::workflows

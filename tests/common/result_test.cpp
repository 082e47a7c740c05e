#include "common/result.hpp"

#include <gtest/gtest.h>

namespace arbor {
namespace {

Result<int> parse_positive(int x) {
  if (x <= 0) return fail(ErrorCode::invalid_argument, "expected a positive number, got " + std::to_string(x));
  return x;
}

TEST(Result, CarriesValueOrError) {
  auto ok = parse_positive(3);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(*ok, 3);
  auto bad = parse_positive(-1);
  ASSERT_FALSE(bad.has_value());
  EXPECT_EQ(bad.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(bad.error().describe(), "invalid argument: expected a positive number, got -1");
}

}  // namespace
}  // namespace arbor

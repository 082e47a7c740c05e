// common/log.hpp: level names, and a clear error for an unknown one.
#include <gtest/gtest.h>

#include "common/log.hpp"

namespace arbor::log {
namespace {

TEST(Log, LevelNamesParse) {
  EXPECT_EQ(parse_level("trace"), spdlog::level::trace);
  EXPECT_EQ(parse_level("debug"), spdlog::level::debug);
  EXPECT_EQ(parse_level("warn"), spdlog::level::warn);
  EXPECT_EQ(parse_level("warning"), spdlog::level::warn);
  EXPECT_EQ(parse_level("error"), spdlog::level::err);
  EXPECT_EQ(parse_level("off"), spdlog::level::off);
  EXPECT_FALSE(parse_level("DEBUG"));
  EXPECT_FALSE(parse_level("err"));
  EXPECT_FALSE(parse_level(""));
}

TEST(Log, SetLevelChangesTheLoggerOrNamesTheChoices) {
  const auto saved = logger().level();
  ASSERT_TRUE(set_level("debug"));
  EXPECT_TRUE(enabled(spdlog::level::debug));
  ASSERT_TRUE(set_level("error"));
  EXPECT_FALSE(enabled(spdlog::level::warn));
  auto bad = set_level("verbose");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(bad.error().message.find("unknown log level 'verbose'"), std::string::npos) << bad.error().message;
  EXPECT_NE(bad.error().message.find("trace, debug, info, warn"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(enabled(spdlog::level::warn));  // unchanged by the failed call
  logger().set_level(saved);
}

}  // namespace
}  // namespace arbor::log

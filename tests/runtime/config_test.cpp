// The one configuration parser (arbor/config.hpp) and the front ends that use it: the
// enums' names, the ranges, and the server config file reading both.
#include <gtest/gtest.h>

#include "arbor/config.hpp"
#include "runtime/server/server_config.hpp"

namespace arbor {
namespace {

TEST(Config, NamesParseIntoEnumsAndBack) {
  for (const std::string& name : eviction_names()) EXPECT_EQ(to_string(*parse_eviction(name)), name);
  for (const std::string& name : precision_names()) EXPECT_EQ(to_string(*parse_precision(name)), name);
  for (const std::string& name : device_names()) EXPECT_EQ(to_string(*parse_device_choice(name)), name);
  EXPECT_EQ(device_names(), (std::vector<std::string>{"cpu", "cuda", "auto"}));
  EXPECT_EQ(*parse_device_choice("auto"), DeviceChoice::automatic);
  EXPECT_EQ(parse_device_choice("gpu").error().message, "must be cpu, cuda or auto (got 'gpu')");
  EXPECT_EQ(eviction_names(), (std::vector<std::string>{"lru", "lfu", "workflow"}));
  EXPECT_EQ(*parse_eviction("priority"), Eviction::workflow);
  EXPECT_EQ(parse_eviction("random").error().message, "must be lru, lfu or workflow (got 'random')");
  EXPECT_EQ(parse_precision("FAST").error().message, "must be accurate or fast (got 'FAST')");
  EXPECT_EQ(parse_eviction("LRU").error().code, ErrorCode::invalid_argument);
}

TEST(Config, CheckNamesTheFirstSettingOutOfItsRange) {
  EXPECT_TRUE(check_config(RuntimeConfig{}));
  RuntimeConfig c;
  c.page_size = 0;
  EXPECT_EQ(check_config(c).error().message, "page_size must be in 1..1024 (got 0)");
  c = RuntimeConfig{};
  c.max_step_tokens = 0;
  EXPECT_EQ(check_config(c).error().message, "max_step_tokens must be in 1..1048576 (got 0)");
  c = RuntimeConfig{};
  c.num_threads = -1;
  EXPECT_EQ(check_config(c).error().message, "num_threads must be in 0..4096 (got -1)");
  c = RuntimeConfig{};
  c.tenants["t"].quota_pages = std::size_t(-1);
  EXPECT_EQ(check_config(c).error().message,
            "tenant 't': quota_pages must be in 0..1099511627776 (got 18446744073709551615)");
}

// The server's config file takes the same ranges and names (page_size was 1..4096 there
// while the runtime refused anything above 1024).
TEST(Config, TheServerConfigFileUsesTheSameLimitsAndNames) {
  auto big = server::parse_server_config(R"({"runtime":{"page_size":2048}})");
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().message, "config '/runtime/page_size' must be between 1 and 1024");
  auto eviction = server::parse_server_config(R"({"runtime":{"eviction":"random"}})");
  ASSERT_FALSE(eviction);
  EXPECT_EQ(eviction.error().message, "config '/runtime/eviction' must be lru, lfu or workflow (got 'random')");
  auto precision = server::parse_server_config(R"({"runtime":{"precision":"quick"}})");
  ASSERT_FALSE(precision);
  EXPECT_EQ(precision.error().message, "config '/runtime/precision' must be accurate or fast (got 'quick')");
  auto ok = server::parse_server_config(R"({"runtime":{"eviction":"lfu","precision":"fast","page_size":1024}})");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(ok->runtime.eviction, Eviction::lfu);
  EXPECT_EQ(ok->runtime.precision, Precision::fast);
}

// The tool pin's TTL (KV retention during tool calls): on by default, 0 turns it off,
// one range for the runtime and the server's file.
TEST(Config, ToolPinTtlHasOneRangeEverywhere) {
  EXPECT_EQ(RuntimeConfig{}.tool_pin_ttl_ms, 30000);
  RuntimeConfig c;
  c.tool_pin_ttl_ms = -1;
  EXPECT_EQ(check_config(c).error().message, "tool_pin_ttl_ms must be in 0..3600000 (got -1)");
  c.tool_pin_ttl_ms = 0;
  EXPECT_TRUE(check_config(c));
  auto off = server::parse_server_config(R"({"runtime":{"tool_pin_ttl_ms":0}})");
  ASSERT_TRUE(off) << off.error().message;
  EXPECT_EQ(off->runtime.tool_pin_ttl_ms, 0);
  auto big = server::parse_server_config(R"({"runtime":{"tool_pin_ttl_ms":3600001}})");
  ASSERT_FALSE(big);
  EXPECT_EQ(big.error().message, "config '/runtime/tool_pin_ttl_ms' must be between 0 and 3600000");
}

}  // namespace
}  // namespace arbor

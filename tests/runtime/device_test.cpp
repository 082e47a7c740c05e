// RuntimeConfig::device and the server config's runtime.device: what a runtime reports
// it runs on, and the errors for a bad name or an unavailable device.
#include <gtest/gtest.h>

#include "model/device.hpp"
#include "runtime/server/server_config.hpp"
#include "runtime_test_util.hpp"

namespace arbor::testing {
namespace {

bool cuda_available() { return model::cuda_built() && model::cuda_device_count() > 0; }

TEST(RuntimeDevice, AutomaticReportsTheDeviceItChoseAndWhy) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  EXPECT_EQ(rt->config().device, DeviceChoice::automatic);
  EXPECT_EQ(rt->device(), cuda_available() ? "cuda" : "cpu");
  EXPECT_EQ(rt->device_info().rfind(rt->device() + " (", 0), 0u) << rt->device_info();
  EXPECT_NE(rt->device_info().find("auto: "), std::string::npos) << rt->device_info();
}

TEST(RuntimeDevice, CpuIsCpuAndGeneratesAsBefore) {
  RuntimeConfig c = small_config();
  c.device = DeviceChoice::cpu;
  auto rt = make_runtime(c);
  ASSERT_TRUE(rt);
  EXPECT_EQ(rt->device(), "cpu");
  EXPECT_EQ(rt->device_info().find("auto"), std::string::npos) << rt->device_info();
  auto req = user_request("What is the capital of France?", 8);
  auto out = rt->generate(req);
  ASSERT_TRUE(out) << out.error().describe();
  EXPECT_NE(out->text.find("Paris"), std::string::npos) << out->text;
}

// A device is a name only in the front ends (CLI, server config), which parse it once
// (parse_device_choice): an unknown name fails there, naming where.
TEST(RuntimeDevice, UnknownNameIsInvalidWhereItIsParsed) {
  auto bad = parse_device_choice("gpu");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(bad.error().message, "must be cpu, cuda or auto (got 'gpu')");
  auto server = server::parse_server_config(R"({"runtime":{"device":"gpu"}})");
  ASSERT_FALSE(server);
  EXPECT_EQ(server.error().message, "config '/runtime/device' must be cpu, cuda or auto (got 'gpu')");
}

TEST(RuntimeDevice, CudaWhereUnavailableSaysWhyAndWhatToUse) {
  if (cuda_available()) GTEST_SKIP() << "a CUDA device is present: cuda is available";
  RuntimeConfig c = small_config();
  c.device = DeviceChoice::cuda;
  auto rt = Runtime::create(c);
  ASSERT_FALSE(rt);
  EXPECT_EQ(rt.error().code, ErrorCode::unsupported);
  EXPECT_NE(rt.error().message.find("device 'cuda' was requested"), std::string::npos) << rt.error().message;
  EXPECT_NE(rt.error().message.find("use device 'cpu' or 'auto'"), std::string::npos) << rt.error().message;
}

// kv_memory_mb 0 (the default) sizes the pool from the device: on the CPU, 256 MiB.
TEST(RuntimeKvPool, AutomaticIs256MiBOnTheCpuAndAGivenSizeIsKept) {
  RuntimeConfig c = small_config();
  c.device = DeviceChoice::cpu;
  c.kv_memory_mb = 0;
  EXPECT_EQ(RuntimeConfig{}.kv_memory_mb, 0u);
  auto automatic = make_runtime(c);
  ASSERT_TRUE(automatic);
  EXPECT_EQ(automatic->kv_pool_bytes(), std::size_t(256) << 20);
  EXPECT_NE(automatic->device_info().find("KV pool 256 MiB (automatic)"), std::string::npos)
      << automatic->device_info();
  const int automatic_pages = automatic->cache_stats().pages_total;
  automatic.reset();

  c.kv_memory_mb = 64;
  auto given = make_runtime(c);
  ASSERT_TRUE(given);
  EXPECT_EQ(given->kv_pool_bytes(), std::size_t(64) << 20);
  EXPECT_NE(given->device_info().find("KV pool 64 MiB"), std::string::npos) << given->device_info();
  EXPECT_EQ(given->device_info().find("automatic"), std::string::npos) << given->device_info();
  const int given_pages = given->cache_stats().pages_total;
  EXPECT_GT(given_pages, 0);
  EXPECT_NEAR(automatic_pages, 4 * given_pages, 4);  // same page size, 4x the bytes
}

TEST(ServerConfigKvPool, ZeroMeansAutomaticAndIsTheDefault) {
  auto c = server::parse_server_config(R"({"runtime":{"kv_memory_mb":0}})");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->runtime.kv_memory_mb, 0u);
  auto defaulted = server::parse_server_config(R"({"runtime":{}})");
  ASSERT_TRUE(defaulted) << defaulted.error().message;
  EXPECT_EQ(defaulted->runtime.kv_memory_mb, 0u);
  EXPECT_FALSE(server::parse_server_config(R"({"runtime":{"kv_memory_mb":-1}})"));
}

TEST(ServerConfigDevice, RuntimeSectionTakesADeviceName) {
  auto c = server::parse_server_config(R"({"runtime":{"device":"cpu"}})");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->runtime.device, DeviceChoice::cpu);
  auto defaulted = server::parse_server_config(R"({"runtime":{}})");
  ASSERT_TRUE(defaulted) << defaulted.error().message;
  EXPECT_EQ(defaulted->runtime.device, DeviceChoice::automatic);
  auto bad = server::parse_server_config(R"({"runtime":{"device":1}})");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("/runtime/device"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace arbor::testing

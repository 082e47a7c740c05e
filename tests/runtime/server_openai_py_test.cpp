// The official `openai` Python package against the in-process server (chat
// completions whole and streamed, completions, cached_tokens, 400/401, and a tool loop:
// a call, the client's tool message, the model's continuation; whole and streamed). Skips when
// python3 or the package is missing (scripts/install_test_tools.sh installs it).
#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/server/server.hpp"
#include "runtime_test_util.hpp"
#include "server_test_util.hpp"

namespace arbor::server::test {
namespace {

TEST(ServerOpenAiPython, OfficialClientTalksToTheServer) {
  if (std::system("python3 -c 'import openai' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "the Python 'openai' package is not installed; run scripts/install_test_tools.sh";
  auto runtime = Runtime::create(arbor::testing::small_config());
  ASSERT_TRUE(runtime.has_value()) << runtime.error().describe();
  auto backend = make_runtime_backend(**runtime);
  auto config = parse_server_config(R"({"port":0,"keys":{"py-client-key-1":"py"}})");
  ASSERT_TRUE(config.has_value());
  auto server = Server::start(*config, *backend);
  ASSERT_TRUE(server.has_value()) << server.error().message;

  const std::string log = std::string(ARBOR_BINARY_DIR) + "/server_openai_client.log";
  const std::string cmd = "timeout 300 python3 " + std::string(ARBOR_SOURCE_DIR) +
                          "/tests/runtime/server_openai_client.py " + std::to_string((*server)->port()) +
                          " py-client-key-1 > " + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << "python client failed; its output:\n" << arbor::testing::read_text(log);
  EXPECT_NE(arbor::testing::read_text(log).find("ok: openai"), std::string::npos);
  EXPECT_NE(arbor::testing::read_text(log).find("tool loop cached"), std::string::npos);
  (*server)->stop();
  EXPECT_EQ((*runtime)->cache_stats().pages_locked, 0);
}

}  // namespace
}  // namespace arbor::server::test

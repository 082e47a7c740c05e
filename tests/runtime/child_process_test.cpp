// runtime/cli/child_process: the first line and its port, a child that exits or stays
// silent before its line (an error naming the command, never a hang), and stopping.
#include "runtime/cli/child_process.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace arbor::cli {
namespace {

ChildProcessOptions shell(const std::string& script, const std::string& marker = "listening on 127.0.0.1:") {
  return {.argv = {"/bin/sh", "-c", script}, .port_marker = marker};
}

TEST(ChildProcess, ReadsThePortFromTheFirstLine) {
  auto child = ChildProcess::start(shell("echo 'arbor node: listening on 127.0.0.1:4242 (model m)'; exec sleep 60"));
  ASSERT_TRUE(child) << child.error().describe();
  EXPECT_EQ(child->port(), 4242);
  EXPECT_EQ(child->first_line(), "arbor node: listening on 127.0.0.1:4242 (model m)");
  EXPECT_EQ(child->wait_exit(0), -1);  // still running
  child->terminate();
  EXPECT_EQ(child->wait_exit(60), 128 + 15);  // sleep ends by SIGTERM
  EXPECT_EQ(child->wait_exit(0), 128 + 15);   // the same status again
}

TEST(ChildProcess, KillNowReapsTheChild) {
  auto child = ChildProcess::start(shell("echo ready; exec sleep 60", ""));
  ASSERT_TRUE(child) << child.error().describe();
  EXPECT_EQ(child->port(), 0);
  child->kill_now();
  EXPECT_EQ(child->wait_exit(0), 128 + 9);
}

TEST(ChildProcess, AChildThatExitsBeforeItsLineIsAnErrorWithItsStatus) {
  auto child = ChildProcess::start(shell("printf partial; exit 3"));
  ASSERT_FALSE(child);
  EXPECT_EQ(child.error().code, ErrorCode::failed);
  EXPECT_NE(child.error().message.find("exited with status 3 before printing its first line"), std::string::npos)
      << child.error().message;
  EXPECT_NE(child.error().message.find("(it printed \"partial\")"), std::string::npos) << child.error().message;
  EXPECT_NE(child.error().message.find("`/bin/sh -c"), std::string::npos) << child.error().message;
}

TEST(ChildProcess, ASilentChildIsStoppedAtTheBound) {
  auto options = shell("exec sleep 60");
  options.first_line_seconds = 0.2;
  auto child = ChildProcess::start(options);
  ASSERT_FALSE(child);
  EXPECT_EQ(child.error().code, ErrorCode::timeout);
  EXPECT_NE(child.error().message.find("printed no line within 0.2 s"), std::string::npos) << child.error().message;
}

TEST(ChildProcess, AFirstLineWithoutThePortIsAnError) {
  for (const std::string line : {"listening elsewhere", "listening on 127.0.0.1:x", "listening on 127.0.0.1:70000"}) {
    auto child = ChildProcess::start(shell("echo '" + line + "'; exec sleep 60"));
    ASSERT_FALSE(child) << line;
    EXPECT_NE(child.error().message.find("printed \"" + line + "\" first"), std::string::npos) << child.error().message;
  }
}

TEST(ChildProcess, AMissingExecutableIsAnError) {
  auto child = ChildProcess::start({.argv = {"/nonexistent/arbor", "serve"}});
  ASSERT_FALSE(child);
  EXPECT_NE(child.error().message.find("cannot start `/nonexistent/arbor serve`"), std::string::npos)
      << child.error().message;
}

TEST(ChildProcess, StopSecondsLetsTheChildExitOnSigterm) {
  // The child traps SIGTERM and exits 7: destroying the object waits for that exit.
  const std::string marker = std::string(ARBOR_BINARY_DIR) + "/child_process_test_" + std::to_string(getpid());
  {
    auto options =
        shell("trap 'echo done > " + marker + "; exit 7' TERM; echo ready; while :; do sleep 0.05; done", "");
    options.stop_seconds = 60;
    auto child = ChildProcess::start(options);
    ASSERT_TRUE(child) << child.error().describe();
  }
  EXPECT_TRUE(std::filesystem::exists(marker));
  std::filesystem::remove(marker);
}

}  // namespace
}  // namespace arbor::cli

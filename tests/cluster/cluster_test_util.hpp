// Shared by the cluster tests that run the `arbor` binary as processes (nodes, routers).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/cli/child_process.hpp"

namespace arbor::cluster::test {

inline const std::string kArbor = std::string(ARBOR_BINARY_DIR) + "/arbor";

// `arbor <args>`, whose first stdout line holds "<marker><port>"; SIGKILLed and reaped
// when it goes, so a failing test leaves nothing running. Null (a test failure saying
// why) when it did not start.
inline std::unique_ptr<cli::ChildProcess> start_arbor(std::vector<std::string> args, const std::string& marker) {
  args.insert(args.begin(), kArbor);
  auto child = cli::ChildProcess::start({.argv = std::move(args), .port_marker = marker});
  EXPECT_TRUE(child) << child.error().describe();
  return child ? std::make_unique<cli::ChildProcess>(std::move(*child)) : nullptr;
}

}  // namespace arbor::cluster::test

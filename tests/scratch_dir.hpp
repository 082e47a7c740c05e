// A scratch directory of its own for the running test case. ctest runs the cases of
// one suite as separate processes in parallel (-j), so a fixed directory that each
// case's SetUp clears would be cleared under a sibling's feet.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace arbor::testing {

// ARBOR_BINARY_DIR/<base>_<case name>_<pid>, not created.
inline std::filesystem::path scratch_dir(const std::string& base) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  const std::string name = info ? info->name() : "none";
  return std::filesystem::path(ARBOR_BINARY_DIR) / (base + "_" + name + "_" + std::to_string(getpid()));
}

}  // namespace arbor::testing

// Helpers for the workflows tests: load inline documents and find diagnostics.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "workflows/workflow.hpp"

namespace arbor::workflows::testing {

inline const std::string kExamplesDir = std::string(ARBOR_SOURCE_DIR) + "/workflows/examples";

inline LoadResult<Plan> load(const std::string& text, const InputOverrides& overrides = {}) {
  return load_workflow_text(text, DocumentAccess::local_to(kExamplesDir), overrides, "wf.json");
}

// The diagnostics of a load that must fail.
inline Diagnostics errors_of(const std::string& text, const InputOverrides& overrides = {}) {
  auto r = load(text, overrides);
  EXPECT_FALSE(r.has_value()) << "expected the workflow to be rejected";
  return r ? Diagnostics() : r.error();
}

// Asserts one diagnostic at `pointer` with this position whose message contains `part`.
inline void expect_diag(const Diagnostics& d, const std::string& pointer, int line, int column,
                        const std::string& part) {
  const Diagnostic* found = nullptr;
  for (const auto& item : d.items())
    if (item.pointer == pointer && item.message.find(part) != std::string::npos) found = &item;
  ASSERT_NE(found, nullptr) << "no diagnostic at " << pointer << " containing '" << part
                            << "'; got:\n" << d.format();
  EXPECT_EQ(found->line, line) << found->format(d.file());
  EXPECT_EQ(found->column, column) << found->format(d.file());
}

}  // namespace arbor::workflows::testing

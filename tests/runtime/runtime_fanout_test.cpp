// Large fan-outs on the real model (issue 8, defect 4): a run as wide as the validator
// allows completes, with its agents waiting in the run actor (backpressure) rather
// than failing on a full scheduler queue.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>

#include "runtime_test_util.hpp"

namespace arbor::testing {
namespace {

// Page size 1: every worker matches all but the last token of its (equal) prompt, so
// each computes one token and 1,000 agents take seconds.
RuntimeConfig wide_config(std::size_t window) {
  RuntimeConfig c = small_config();
  c.page_size = 1;
  c.kv_memory_mb = 128;
  c.max_queued_requests = window;
  return c;
}

TEST(RuntimeFanOut, AThousandAgentsCompleteWithinTheRunsWindow) {
  auto rt = make_runtime(wide_config(64));
  ASSERT_TRUE(rt);
  std::mutex mu;
  int most_at_scheduler = 0;  // live + queued sequences seen in any event's snapshot
  auto h = rt->start(wide_workflow(1000, "wide"),
                     {.on_event =
                          [&](const Event& e) {
                            if (e.kind != Event::Kind::agent_finished) return;
                            std::lock_guard lock(mu);
                            most_at_scheduler =
                                std::max(most_at_scheduler, e.cache.live_sequences + e.cache.queued_requests);
                          },
                      .workflow_is_text = true});
  ASSERT_TRUE(h) << h.error().describe();
  const RunResult r = h->wait();
  ASSERT_EQ(r.status, RunStatus::ok) << r.error;
  ASSERT_EQ(r.agents.size(), 1001u);
  for (const auto& a : r.agents) ASSERT_EQ(a.status, AgentStatus::ok) << a.id << ": " << a.error;
  std::lock_guard lock(mu);
  EXPECT_GT(most_at_scheduler, 0);
  EXPECT_LE(most_at_scheduler, 64);  // the rest waited in the run actor
  expect_clean(*rt);
}

}  // namespace
}  // namespace arbor::testing

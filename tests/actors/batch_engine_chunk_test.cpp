// Prefill chunks smaller than a page. A page may enter the radix tree (where siblings
// match it at once) only when every one of its positions has been computed; with
// chunks of a page or more that is easy to get right by accident, with sub-page
// chunks a page fills over several steps. Every test checks the scheduler's
// invariants after every step (the tree never holds a position a sequence has not
// computed) and compares outputs with a run that cannot share anything.
#include <gtest/gtest.h>

#include "actors/batch_engine.hpp"
#include "batch_engine_test_util.hpp"

namespace arbor::actors {
namespace {

using namespace testing;
constexpr int kShort = 4;  // guidelines: a ~60-token shared prompt, 3 full 16-token pages

BatchEngineConfig chunked(int chunk, int page_size, bool caching, int max_step_tokens = 1024) {
  BatchEngineConfig c = config(4096 / page_size, caching);
  c.prefill_chunk = chunk;
  c.page_size = page_size;
  c.max_step_tokens = max_step_tokens;
  return c;
}

// Outputs (token ids) of `ids`, in order.
std::vector<std::vector<std::int32_t>> outputs(const Harness& h, const std::vector<std::uint64_t>& ids) {
  std::vector<std::vector<std::int32_t>> out;
  for (auto id : ids) {
    auto it = h.results.find(id);
    if (it == h.results.end()) {
      ADD_FAILURE() << "request " << id << " did not finish";
      out.emplace_back();
      continue;
    }
    EXPECT_TRUE(it->second.ok) << it->second.error;
    out.push_back(it->second.tokens);
  }
  return out;
}

TEST(BatchEngineChunks, SubPageChunksFanOutCachingOnEqualsOff) {
  struct Case {
    int chunk, page;
  };
  for (const Case c : {Case{5, 16}, Case{11, 16}, Case{24, 64}}) {
    SCOPED_TRACE("prefill_chunk " + std::to_string(c.chunk) + ", page " + std::to_string(c.page));
    const int guidelines = c.page > 16 ? 12 : kShort;  // a full 64-token page needs the long prompt
    Harness on(chunked(c.chunk, c.page, true)), off(chunked(c.chunk, c.page, false));
    const auto a = submit_team(on, 4, 4, guidelines);
    const auto b = submit_team(off, 4, 4, guidelines);
    on.drain_checked();
    off.drain_checked();
    EXPECT_EQ(outputs(on, a), outputs(off, b));
    // The siblings did share: all but the leader read the prefix from the cache.
    int readers = 0;
    for (auto id : a) readers += on.results.contains(id) && on.results.at(id).cached_tokens >= std::size_t(c.page);
    EXPECT_EQ(readers, 3);
    on.expect_clean();
    off.expect_clean();
  }
}

// Chunks cut by a small step budget land at irregular offsets inside pages, while
// prompts that share a prefix of a different length with the team arrive in between.
TEST(BatchEngineChunks, TreeNeverHoldsUncomputedPositions) {
  auto late_prompts = [] {
    return std::vector{chat_prompt(shared_system(kShort) + " Extra rule: be kind.", "Hi"),
                       chat_prompt(shared_system(kShort), "Summarise guideline 3.")};  // a repeat
  };
  Harness h(chunked(3, 16, true, /*max_step_tokens=*/8));
  std::vector<std::uint64_t> ids = submit_team(h, 4, 3, kShort);
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(h.step_checked());
  for (auto& p : late_prompts()) ids.push_back(h.submit(p, 3));
  h.drain_checked();
  Harness fresh(chunked(3, 16, false, 8));
  std::vector<std::uint64_t> fresh_ids = submit_team(fresh, 4, 3, kShort);
  for (auto& p : late_prompts()) fresh_ids.push_back(fresh.submit(p, 3));
  fresh.drain_checked();
  EXPECT_EQ(outputs(h, ids), outputs(fresh, fresh_ids));
  EXPECT_GT(h.s->snapshot().cached_tokens, 0u);
  h.expect_clean();
}

// The leader of a fan-out is cancelled halfway through the shared prefix (a page is
// partly written); its waiting siblings take over and its prompt comes back later.
// Every output equals the one of a fresh run of the same prompt.
TEST(BatchEngineChunks, CancelledLeaderMidPrefillThenResubmittedEqualsFreshRun) {
  Harness h(chunked(5, 16, true));
  const auto team = submit_team(h, 4, 4, kShort);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(h.step_checked());  // 25 of ~60 prefix tokens: 2nd page part-written
  ASSERT_FALSE(h.results.contains(team[0]));
  h.s->cancel(team[0]);
  ASSERT_EQ(h.results.at(team[0]).finish_reason, FinishReason::cancelled);
  EXPECT_EQ(h.s->check_invariants(), "");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(h.step_checked());
  const auto again = h.submit(chat_prompt(shared_system(kShort), "Summarise guideline 3."), 4);  // team[0]'s
  h.drain_checked();

  Harness fresh(chunked(5, 16, false));
  const auto expected = submit_team(fresh, 4, 4, kShort);
  fresh.drain_checked();
  const std::vector<std::uint64_t> got_ids = {again, team[1], team[2], team[3]};
  EXPECT_EQ(outputs(h, got_ids), outputs(fresh, expected));
  ASSERT_TRUE(h.results.contains(again));
  EXPECT_GE(h.results.at(again).cached_tokens, kPage);  // it read what the others committed
  h.expect_clean();
}

}  // namespace
}  // namespace arbor::actors

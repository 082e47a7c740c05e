// The scheduler alone (no actors), on the real model: continuous batching, fan-out
// dedupe, caching on == off, memory pressure, never-fit errors, cancel, pins.
#include "actors/batch_engine.hpp"

#include <gtest/gtest.h>

#include "actors/conversation.hpp"
#include "actors_test_util.hpp"
#include "batch_engine_test_util.hpp"

namespace arbor::actors {
namespace {

using namespace testing;

TEST(BatchEngine, FanOutPrefillsTheSharedPrefixOnce) {
  Harness h(config());
  const auto ids = submit_team(h, 4, 6);  // all arrive before the first step
  h.drain();
  std::size_t prefix = 0, suffixes = 0;
  for (auto id : ids) {
    ASSERT_TRUE(h.results.at(id).ok) << h.results.at(id).error;
    prefix = std::max<std::size_t>(prefix, h.results.at(id).cached_tokens);
  }
  ASSERT_GE(prefix, 112u);
  int leaders = 0;
  for (auto id : ids) {
    const auto& r = h.results.at(id);
    if (r.cached_tokens == 0) ++leaders;
    else EXPECT_GE(r.cached_tokens, prefix / kPage * kPage);
    suffixes += r.prompt_tokens - prefix;
  }
  EXPECT_EQ(leaders, 1);  // one leader computed the prefix; the others waited and matched it
  const auto snap = h.s->snapshot();
  EXPECT_LE(snap.computed_tokens, prefix + suffixes + kPage * ids.size());
  h.expect_clean();
}

TEST(BatchEngine, DecodeRowsOfAllSequencesShareOneStep) {
  Harness h(config());
  const auto ids = submit_team(h, 4, 12);
  h.drain();
  // Sequential decoding would need >= 4 * 12 steps; continuous batching far fewer.
  EXPECT_LT(h.s->snapshot().num_steps, 30u);
  for (auto id : ids) {
    EXPECT_EQ(h.results.at(id).generated_tokens, h.results.at(id).tokens.size());
    EXPECT_EQ(h.streamed[id], h.results.at(id).text);
  }
  h.expect_clean();
}

// Every step that ran a forward is counted and timed; the forward is a part of it, the
// rest is host work (admission, matching, sampling), never negative.
TEST(BatchEngine, BatchedStepsAreTimedWithTheirForwardPart) {
  Harness h(config());
  EXPECT_EQ(h.s->snapshot().batched_steps, 0u);
  const auto ids = submit_team(h, 3, 10);
  h.drain();
  for (auto id : ids) EXPECT_TRUE(h.results.at(id).ok) << h.results.at(id).error;
  const auto snap = h.s->snapshot();
  EXPECT_GE(snap.batched_steps, 10u) << "10 tokens each, one per decode step at most";
  EXPECT_LE(snap.batched_steps, snap.num_steps);
  EXPECT_GT(snap.forward_seconds, 0.0);
  EXPECT_LE(snap.forward_seconds, snap.step_seconds);
  const auto json = nlohmann::json(static_cast<const CacheStats&>(snap));
  EXPECT_EQ(json.at("batched_steps"), snap.batched_steps);
  EXPECT_DOUBLE_EQ(json.at("forward_seconds").get<double>(), snap.forward_seconds);
  h.expect_clean();
}

TEST(BatchEngine, CachingOnAndOffGiveTheSameTokens) {
  Harness on(config(256, true)), off(config(256, false));
  const auto a = submit_team(on, 4, 8);
  const auto b = submit_team(off, 4, 8);
  on.drain();
  off.drain();
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(on.results.at(a[i]).tokens, off.results.at(b[i]).tokens) << i;
    EXPECT_EQ(off.results.at(b[i]).cached_tokens, 0u);
  }
  EXPECT_LT(on.s->snapshot().computed_tokens * 2, off.s->snapshot().computed_tokens);
  on.expect_clean();
  off.expect_clean();
}

TEST(BatchEngine, UnderMemoryPressureRequestsQueueAndAllComplete) {
  // 12 pages: a request needs ~10 (prompt + budget) with caching off, so one at a time.
  Harness h(config(12, false));
  const auto ids = submit_team(h, 4, 6);
  h.s->step();
  EXPECT_EQ(h.s->snapshot().live_sequences, 1);
  EXPECT_EQ(h.s->snapshot().queued_requests, 3);
  h.drain();
  for (auto id : ids) EXPECT_TRUE(h.results.at(id).ok) << h.results.at(id).error;
  h.expect_clean();
}

TEST(BatchEngine, CachedPagesAreEvictedForNewWork) {
  Harness h(config(24, true));
  for (const char* theme : {"rivers", "mountains", "deserts"}) {
    h.submit(chat_prompt(shared_system() + " Theme: " + theme, "Hello"), 4, theme);
    h.drain();
  }
  for (const auto& [id, r] : h.results) EXPECT_TRUE(r.ok) << r.error;
  EXPECT_GT(h.s->snapshot().evictions, 0u);
  h.expect_clean();
}

TEST(BatchEngine, RequestsThatCanNeverFitFailAtOnce) {
  Harness h(config(8, true));  // 128 tokens
  h.submit(chat_prompt(shared_system(), "Hi"), 4);
  std::vector<std::int32_t> small = {1, 2, 3};
  const auto too_long = h.submit(small, 100000);
  const auto empty = h.submit({}, 4);
  const auto bad_id = h.submit({1, 999999}, 4);
  EXPECT_EQ(h.results.size(), 4u);  // all failed at submit, before any step
  for (const auto& [id, r] : h.results) EXPECT_FALSE(r.ok);
  EXPECT_NE(h.results.begin()->second.error.find("whole pool has 8"), std::string::npos);
  EXPECT_EQ(h.results.at(too_long).error_code, int(ErrorCode::too_long));
  EXPECT_EQ(h.results.at(empty).error_code, int(ErrorCode::invalid_argument));
  EXPECT_EQ(h.results.at(bad_id).error_code, int(ErrorCode::invalid_argument));
  EXPECT_FALSE(h.s->has_work());
  h.expect_clean();
}

// A config it cannot run is refused at create, naming the batch engine and the fix.
TEST(BatchEngine, CreateRefusesABadConfigNamingWhatToFix) {
  auto error_of = [](BatchEngineConfig c) {
    auto r = BatchEngine::create(std::move(c));
    EXPECT_FALSE(r);
    return r ? Error{} : r.error();
  };
  BatchEngineConfig no_model = config();
  no_model.model = nullptr;
  EXPECT_EQ(error_of(no_model).message, "batch engine: no model given");
  BatchEngineConfig no_pages = config(0);
  EXPECT_EQ(error_of(no_pages).message, "batch engine: the KV pool has no pages; raise kv_memory_mb");
  BatchEngineConfig no_chunk = config();
  no_chunk.prefill_chunk = 0;
  const Error e = error_of(no_chunk);
  EXPECT_EQ(e.code, ErrorCode::invalid_argument);
  EXPECT_EQ(e.message, "batch engine: prefill_chunk and max_step_tokens must be positive");
}

TEST(BatchEngine, CancelQueuedAndLiveRequests) {
  Harness h(config(30, false));  // each needs ~16 pages: one live, one queued
  const auto ids = submit_team(h, 2, 100);
  h.s->step();  // the first is live, the second queued
  h.s->step();
  h.s->cancel(ids[1]);
  EXPECT_EQ(h.results.at(ids[1]).finish_reason, FinishReason::cancelled);
  for (int i = 0; i < 3; ++i) h.s->step();
  h.s->cancel(ids[0]);
  EXPECT_EQ(h.results.at(ids[0]).finish_reason, FinishReason::cancelled);
  EXPECT_LT(h.results.at(ids[0]).generated_tokens, 100u);
  EXPECT_GT(h.results.at(ids[0]).generated_tokens, 0u);
  EXPECT_FALSE(h.s->has_work());
  h.expect_clean();
}

TEST(BatchEngine, PrefillOnlyWarmsTheCacheAndPinsHoldIt) {
  Harness h(config());
  Conversation c(real_model()->tokenizer(), real_chat());
  c.start(shared_system(), "Hi");
  const auto warm = h.submit(c.system_ids(), 0, "t", "run-9");
  h.drain();
  EXPECT_EQ(h.results.at(warm).finish_reason, FinishReason::prefill);
  EXPECT_EQ(h.results.at(warm).computed_tokens, c.system_ids().size());
  auto pin = h.s->pin(PinRequest{"t", "run-9", c.system_ids(), 1});
  ASSERT_TRUE(pin.ok) << pin.error;
  EXPECT_GT(h.s->snapshot().pages_locked, 0);
  const auto reader = h.submit(c.prompt(), 4);
  h.drain();
  EXPECT_EQ(h.results.at(reader).cached_tokens, c.system_ids().size() / kPage * kPage);
  h.s->cancel_run("run-9");  // drops the run's pins and refuses its later requests
  EXPECT_EQ(h.s->snapshot().pages_locked, 0);
  const auto late = h.submit(c.prompt(), 4, "t", "run-9");
  EXPECT_EQ(h.results.at(late).error_code, int(ErrorCode::cancelled));
  h.expect_clean();
}

// A server sees runs without end: what the scheduler remembers per run stays bounded,
// and forgetting an old closed run cannot leak a pin (its owner's end drops it).
TEST(BatchEngine, PerRunBookkeepingIsBoundedAndPinsDieWithTheirOwner) {
  Harness h(config());
  const std::size_t kept = BatchEngine::kClosedRunsKept;
  for (std::size_t i = 0; i < kept + 500; ++i) h.s->cancel_run("run-" + std::to_string(i));
  EXPECT_EQ(h.s->num_closed_runs(), kept);
  Conversation c(real_model()->tokenizer(), real_chat());
  c.start(shared_system(), "Hi");
  const auto late = h.submit(c.prompt(), 4, "t", "run-" + std::to_string(kept + 499));
  EXPECT_EQ(h.results.at(late).error_code, int(ErrorCode::cancelled));  // recent runs are still refused

  h.submit(c.system_ids(), 0, "t", "run-new");
  h.drain();
  auto pin = h.s->pin(PinRequest{"t", "run-0", c.system_ids(), 1}, /*owner=*/42);  // run-0 is forgotten
  ASSERT_TRUE(pin.ok) << pin.error;
  auto other = h.s->pin(PinRequest{"t", "run-new", c.system_ids(), 1}, /*owner=*/43);
  ASSERT_TRUE(other.ok) << other.error;
  EXPECT_EQ(h.s->num_pins(), 2u);
  h.s->cancel_owner(42);  // the agent that pinned has stopped
  EXPECT_EQ(h.s->num_pins(), 1u);
  h.s->unpin(other.pin_id);
  EXPECT_EQ(h.s->num_pins(), 0u);
  h.expect_clean();
}

}  // namespace
}  // namespace arbor::actors

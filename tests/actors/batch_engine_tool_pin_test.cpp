// Tool pins (SeqRequest::pin_ttl_ms / release_pin; actors/batch_engine.hpp): a finished
// request's history stays pinned while a tool runs, so memory pressure evicts other
// pages; the continuation releases it once admitted; the TTL (an injected clock here)
// ends it; cancelling drops it; and a pin never keeps a request out of the pool.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "batch_engine_test_util.hpp"

namespace arbor::actors {
namespace {

using namespace arbor::actors::testing;
using Clock = std::chrono::steady_clock;

std::size_t pages_for(std::size_t tokens) { return (tokens + kPage - 1) / kPage; }

// A prompt no other test prompt shares a first page with.
std::vector<std::int32_t> filler_prompt(int i) {
  std::string system = "Filler " + std::to_string(i) + " writes about the sea.";
  for (int k = 0; k < 10; ++k) system += " Wave " + std::to_string(i * 100 + k) + " rolls in and out again.";
  return chat_prompt(system, "Describe wave " + std::to_string(i) + ".");
}

// The agent's first request (it stops where a tool is called) with a tool pin.
SeqRequest call_request(int pin_ttl_ms) {
  SeqRequest req;
  req.tenant = "t";
  req.run_id = "run-1";
  req.prompt = chat_prompt(shared_system(), "Call a tool.");
  req.sampling.max_tokens = 4;
  req.pin_ttl_ms = pin_ttl_ms;
  return req;
}

// What the agent sends after the tool result: its history plus new tokens.
SeqRequest continuation(const SeqRequest& call, const SeqResult& r, std::uint64_t release) {
  SeqRequest req = call;
  req.pin_ttl_ms = 0;
  req.release_pin = release;
  req.prompt.insert(req.prompt.end(), r.tokens.begin(), r.tokens.end());
  const auto more = chat_prompt("", "The tool says 42.");
  req.prompt.insert(req.prompt.end(), more.begin() + 1, more.end());
  return req;
}

TEST(BatchEngineToolPin, HistoryStaysPinnedUntilTheContinuationIsAdmitted) {
  Harness h(config());
  const SeqRequest call = call_request(60000);
  const auto id = h.submit(call);
  h.drain_checked();
  const SeqResult& r = h.results.at(id);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_NE(r.pin_id, 0u);
  const std::size_t history = call.prompt.size() + r.tokens.size() - 1;  // positions computed
  auto snap = h.s->snapshot();
  EXPECT_EQ(snap.pins, 1);
  EXPECT_EQ(snap.pages_pinned, int(history / kPage));
  EXPECT_EQ(snap.pages_locked, int(history / kPage));
  EXPECT_EQ(h.s->check_invariants(), "");

  const auto next = h.submit(continuation(call, r, r.pin_id));
  h.drain_checked();
  ASSERT_TRUE(h.results.at(next).ok);
  EXPECT_EQ(h.results.at(next).cached_tokens, history / kPage * kPage);
  snap = h.s->snapshot();
  EXPECT_EQ(snap.pins, 0);  // released by the admission
  EXPECT_EQ(snap.pages_pinned, 0);
  h.expect_clean();
}

TEST(BatchEngineToolPin, ExpiresAfterItsTtlAndThePagesStayCached) {
  auto now = std::make_shared<Clock::time_point>(Clock::now());
  BatchEngineConfig c = config();
  c.clock = [now] { return *now; };
  Harness h(std::move(c));
  const auto id = h.submit(call_request(1000));
  h.drain();
  ASSERT_NE(h.results.at(id).pin_id, 0u);
  ASSERT_TRUE(h.s->next_pin_expiry());
  EXPECT_EQ(*h.s->next_pin_expiry(), *now + std::chrono::milliseconds(1000));
  *now += std::chrono::milliseconds(999);
  EXPECT_EQ(h.s->expire_pins(), 0u);
  EXPECT_EQ(h.s->snapshot().pins, 1);
  *now += std::chrono::milliseconds(1);
  EXPECT_EQ(h.s->expire_pins(), 1u);
  const auto snap = h.s->snapshot();
  EXPECT_EQ(snap.pins, 0);
  EXPECT_EQ(snap.pages_locked, 0);
  EXPECT_GT(snap.pages_cached_idle, 0);  // ordinary cached pages now
  EXPECT_FALSE(h.s->next_pin_expiry());
  h.expect_clean();
}

// Memory pressure: two other requests, each needing most of the free pool, run while
// the tool "runs". With the pin the second one evicts the first one's pages and the
// history survives whole; without it LRU takes the (older) history first.
TEST(BatchEngineToolPin, EvictionSkipsPinnedHistoryUnderMemoryPressure) {
  std::map<bool, std::size_t> cached;
  for (bool pinned : {true, false}) {
    const SeqRequest call = call_request(pinned ? 60000 : 0);
    const std::size_t history_pages = pages_for(call.prompt.size() + 4);
    const std::size_t filler_pages = pages_for(filler_prompt(0).size() + 1);
    BatchEngineConfig c = config(int(history_pages + filler_pages + 2));
    c.max_pinned_pages = c.num_pages;
    Harness h(std::move(c));
    const auto id = h.submit(call);
    h.drain_checked();
    const SeqResult r = h.results.at(id);
    ASSERT_EQ(r.pin_id != 0, pinned);
    for (int i = 0; i < 2; ++i) {  // the other agent's requests, one after the other
      const auto f = h.submit(filler_prompt(i), 2);
      h.drain_checked();
      ASSERT_TRUE(h.results.at(f).ok) << h.results.at(f).error;
    }
    EXPECT_GT(h.s->snapshot().evictions, 0u) << "the pool was not under pressure";
    const auto next = h.submit(continuation(call, r, r.pin_id));
    h.drain_checked();
    ASSERT_TRUE(h.results.at(next).ok) << h.results.at(next).error;
    cached[pinned] = h.results.at(next).cached_tokens;
    if (pinned) {
      EXPECT_EQ(cached[pinned], (call.prompt.size() + r.tokens.size() - 1) / kPage * kPage);
    }
    h.expect_clean();
  }
  EXPECT_GT(cached[true], cached[false] + kPage - 1);  // at least a page more was reused
}

// A request that can be admitted only with the pinned pages, while nothing runs, breaks
// the pin instead of failing or waiting for the TTL.
TEST(BatchEngineToolPin, PinsNeverKeepARequestOutOfThePool) {
  const SeqRequest call = call_request(60000);
  // Room for the history and one page more: the filler needs more than that page.
  BatchEngineConfig c = config(int(pages_for(call.prompt.size() + 4) + 1));
  ASSERT_GT(pages_for(filler_prompt(0).size() + 1), 2u);
  c.max_pinned_pages = c.num_pages;
  Harness h(std::move(c));
  const auto id = h.submit(call);
  h.drain_checked();
  ASSERT_NE(h.results.at(id).pin_id, 0u);
  const auto f = h.submit(filler_prompt(0), 2);
  h.drain_checked();
  ASSERT_TRUE(h.results.at(f).ok) << h.results.at(f).error;
  EXPECT_EQ(h.s->snapshot().pins, 0);  // broken for it
  h.expect_clean();
}

TEST(BatchEngineToolPin, CancellingTheRunOrTheQueuedContinuationReleasesThePin) {
  Harness h(config());
  const SeqRequest call = call_request(60000);
  auto id = h.submit(call);
  h.drain();
  const SeqResult r = h.results.at(id);
  ASSERT_NE(r.pin_id, 0u);
  const auto next = h.submit(continuation(call, r, r.pin_id));  // queued, not stepped
  h.s->cancel(next);
  EXPECT_EQ(h.results.at(next).finish_reason, FinishReason::cancelled);
  EXPECT_EQ(h.s->snapshot().pins, 0);
  h.expect_clean();

  id = h.submit(call);
  h.drain();
  ASSERT_NE(h.results.at(id).pin_id, 0u);
  EXPECT_EQ(h.s->snapshot().pins, 1);
  h.s->cancel_run("run-1");
  EXPECT_EQ(h.s->snapshot().pins, 0);
  EXPECT_EQ(h.s->snapshot().pages_pinned, 0);
  h.expect_clean();
}

}  // namespace
}  // namespace arbor::actors

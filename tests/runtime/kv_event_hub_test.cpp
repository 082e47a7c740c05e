// KvEventHub (runtime/kv_event_hub.cpp) on its own: cancelling a subscription waits for
// a callback running on another thread, whichever thread published before.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "runtime/kv_event_hub.hpp"

namespace arbor {
namespace {

// A router publishes from whichever CAF worker runs its inbox: thread A publishes
// once, then B publishes an event whose callback is still running when A cancels.
// Cancel must wait for that call (the subscriber's state may go right after it).
TEST(KvEventHub, CancelWaitsForACallRunningOnAnotherThreadEvenFromAFormerPublisher) {
  auto hub = std::make_shared<KvEventHub>();
  std::promise<void> entered, first_published;
  std::atomic<bool> finished{false};
  auto subscription = subscribe(hub, [&](const KvEvent& e) {
    if (e.sequence == 1) return;
    entered.set_value();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    finished = true;
  });
  std::thread b([&] {
    first_published.get_future().wait();
    hub->publish(KvEvent{});  // sequence 2: the slow call
  });
  bool finished_when_cancel_returned = false;
  std::thread a([&] {
    hub->publish(KvEvent{});  // sequence 1: A is now a former publisher
    first_published.set_value();
    entered.get_future().wait();
    subscription.reset();
    finished_when_cancel_returned = finished.load();
  });
  a.join();
  b.join();
  EXPECT_TRUE(finished_when_cancel_returned);
}

// From inside its own callback, a reset returns at once (it must not wait for itself)
// and no further event reaches it.
TEST(KvEventHub, AResetFromInsideItsOwnCallbackReturnsAndEndsTheCalls) {
  auto hub = std::make_shared<KvEventHub>();
  int calls = 0;
  KvEventSubscription subscription;
  subscription = subscribe(hub, [&](const KvEvent&) {
    ++calls;
    subscription.reset();
  });
  hub->publish(KvEvent{});
  hub->publish(KvEvent{});
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace arbor

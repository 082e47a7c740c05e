// The KV event hub behind Runtime::subscribe_kv_events (and a cluster router's) and its
// subscriptions' state: what a subscription needs without the rest of the runtime (the
// server, which holds subscriptions, is also built without it: fuzz/).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "arbor/runtime.hpp"

namespace arbor {

// Delivers KV events to subscribers
// (runtime/kv_event_hub.cpp). publish runs on one thread at a time, in order: the cache
// actor's (a runtime's hub), or a cluster router's inbox actor (its nodes' events).
struct KvEventHub {
  std::mutex mu;  // guards subs (never held while a callback runs)
  std::vector<std::shared_ptr<KvEventSubscription::State>> subs;
  std::uint64_t next_sequence = 1;  // the publishing thread only
  std::atomic<std::thread::id> dispatching{};  // the thread last calling callbacks

  void publish(KvEvent event);
};

// A subscription to `hub` (Runtime::subscribe_kv_events, a cluster router's
// ClusterBackend::subscribe_kv_events).
KvEventSubscription subscribe(const std::shared_ptr<KvEventHub>& hub, std::function<void(const KvEvent&)> callback);

struct KvEventSubscription::State {
  std::weak_ptr<KvEventHub> hub;
  std::function<void(const KvEvent&)> callback;
  std::mutex call_mu;  // held while the callback runs
  std::atomic<bool> active{true};

  void deliver(const KvEvent& event);
  void cancel();
};

}  // namespace arbor

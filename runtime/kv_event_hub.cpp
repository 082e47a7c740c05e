// KV events to subscribers, in order, on the publishing thread (a runtime's cache actor,
// a cluster router's inbox actor; the contract: arbor/runtime.hpp), and the
// subscriptions' lifetime.
#include "runtime/kv_event_hub.hpp"

#include <algorithm>

namespace arbor {

void KvEventHub::publish(KvEvent event) {
  event.sequence = next_sequence++;
  std::vector<std::shared_ptr<KvEventSubscription::State>> now;
  {
    std::lock_guard lock(mu);
    if (subs.empty()) return;
    now = subs;
  }
  dispatching.store(std::this_thread::get_id());
  for (const auto& s : now) s->deliver(event);  // no hub lock held: callbacks may (un)subscribe
}

KvEventSubscription subscribe(const std::shared_ptr<KvEventHub>& hub, std::function<void(const KvEvent&)> callback) {
  auto state = std::make_shared<KvEventSubscription::State>();
  state->hub = hub;
  state->callback = std::move(callback);
  {
    std::lock_guard lock(hub->mu);
    hub->subs.push_back(state);
  }
  return KvEventSubscription(std::move(state));
}

void KvEventSubscription::State::deliver(const KvEvent& event) {
  std::lock_guard lock(call_mu);
  if (active.load()) callback(event);
}

void KvEventSubscription::State::cancel() {
  if (!active.exchange(false)) return;
  if (auto h = hub.lock()) {
    {
      std::lock_guard lock(h->mu);
      std::erase_if(h->subs, [this](const auto& s) { return s.get() == this; });
    }
    // From inside a callback call_mu is held by this very thread: nothing to wait for.
    if (h->dispatching.load() == std::this_thread::get_id()) return;
  }
  std::lock_guard wait_for_running_call(call_mu);
}

KvEventSubscription& KvEventSubscription::operator=(KvEventSubscription&& other) noexcept {
  if (this != &other) {
    reset();
    state_ = std::move(other.state_);
  }
  return *this;
}

KvEventSubscription::~KvEventSubscription() { reset(); }

void KvEventSubscription::reset() {
  if (state_) state_->cancel();
  state_.reset();
}

}  // namespace arbor

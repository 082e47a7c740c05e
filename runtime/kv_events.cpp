// Runtime::subscribe_kv_events: a subscription to the runtime's KV event hub
// (runtime/kv_event_hub.cpp delivers; the contract: arbor/runtime.hpp).
#include "runtime/runtime_impl.hpp"

namespace arbor {

KvEventSubscription Runtime::subscribe_kv_events(std::function<void(const KvEvent&)> callback) {
  auto state = std::make_shared<KvEventSubscription::State>();
  state->hub = impl_->kv_events;
  state->callback = std::move(callback);
  {
    std::lock_guard lock(impl_->kv_events->mu);
    impl_->kv_events->subs.push_back(state);
  }
  return KvEventSubscription(std::move(state));
}

}  // namespace arbor

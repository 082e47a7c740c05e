// Runtime::subscribe_kv_events: a subscription to the runtime's KV event hub
// (runtime/kv_event_hub.cpp delivers; the contract: arbor/runtime.hpp).
#include "runtime/runtime_impl.hpp"

namespace arbor {

KvEventSubscription Runtime::subscribe_kv_events(std::function<void(const KvEvent&)> callback) {
  return subscribe(impl_->kv_events, std::move(callback));
}

}  // namespace arbor

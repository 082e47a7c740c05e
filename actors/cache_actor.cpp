#include "actors/cache_actor.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <set>

namespace arbor::actors {
namespace {

struct CacheState {
  std::unique_ptr<BatchEngine> batch;
  bool step_pending = false;
  std::set<caf::actor_addr> monitored;
  // The tool-pin timer: armed for the earliest TTL (BatchEngine::next_pin_expiry).
  std::optional<std::chrono::steady_clock::time_point> expiry_armed;
};

// The interface plus the actor's own timers, which it sends itself: one step per
// (step_atom), and (expire_atom), a request never answered whose timeout is the next
// tool pin's expiry. spawn_cache_actor hands out only the CacheActor part.
using CacheActorImpl = CacheActor::extend<caf::reacts_to<step_atom>, caf::reacts_to<expire_atom>>;
using CacheSelf = CacheActorImpl::stateful_pointer<CacheState>;

// The id of the message's sender, monitored from now on: when it stops, whatever it left
// (queued or live requests, pins) is cancelled. 0 for an anonymous sender.
std::uint64_t monitored_sender(CacheSelf self) {
  auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  if (!sender) return 0;
  if (self->state.monitored.insert(sender).second) self->monitor(sender);
  return sender.id();
}

void arm_pin_expiry(CacheSelf self);

void schedule_step(CacheSelf self) {
  arm_pin_expiry(self);
  if (self->state.step_pending || !self->state.batch->has_work()) return;
  self->state.step_pending = true;
  self->send(self, step_atom::value);
}

// Tool pins expire on time even when no step runs: a request to itself that is never
// answered times out at the earliest TTL (as the agents' deadlines do; unlike a delayed
// message it is dropped when the actor stops), then expired pins are dropped.
void arm_pin_expiry(CacheSelf self) {
  auto& s = self->state;
  const auto next = s.batch->next_pin_expiry();
  if (!next || (s.expiry_armed && *s.expiry_armed <= *next)) return;
  s.expiry_armed = *next;
  const auto delay = std::chrono::ceil<std::chrono::milliseconds>(*next - std::chrono::steady_clock::now());
  self->request(CacheActorImpl{self}, std::max(delay, std::chrono::milliseconds(1)), expire_atom::value)
      .then([] {}, [self, at = *next](caf::error&) {
        auto& st = self->state;
        if (st.expiry_armed == at) st.expiry_armed.reset();
        st.batch->expire_pins();
        schedule_step(self);  // re-arms for the next TTL; freed pages may admit a request
      });
}

CacheActorImpl::behavior_type cache_actor(CacheSelf self, std::shared_ptr<std::unique_ptr<BatchEngine>> boxed) {
  self->state.batch = std::move(*boxed);
  self->set_down_handler([self](caf::down_msg& dm) {
    self->state.monitored.erase(dm.source);
    self->state.batch->cancel_owner(dm.source.id());
    schedule_step(self);
  });
  return {
      [self](SeqRequest& req) -> caf::result<SeqResult> {
        auto rp = self->make_response_promise<SeqResult>();
        const std::uint64_t owner = monitored_sender(self);
        BatchEngine::TokenFn on_token;
        if (req.listener) {
          TokenListener listener = req.listener;
          on_token = [self, listener](const TokenEvent& ev) { self->send(listener, ev); };
        }
        self->state.batch->submit(std::move(req), owner, std::move(on_token),
                                      [rp](SeqResult r) mutable { rp.deliver(std::move(r)); });
        schedule_step(self);
        return rp;
      },
      [self](step_atom) {
        self->state.step_pending = false;
        self->state.batch->step();
        schedule_step(self);
      },
      [self](CancelRequest& c) {
        self->state.batch->cancel(c.request_id);
        schedule_step(self);
      },
      [self](CancelRun& c) {
        self->state.batch->cancel_run(c.run_id);
        schedule_step(self);
      },
      [self](PinRequest& p) -> PinReply { return self->state.batch->pin(p, monitored_sender(self)); },
      [self](UnpinRequest& u) {
        self->state.batch->unpin(u.pin_id);
        schedule_step(self);  // pinned pages may now be evictable for a queued request
      },
      [self](PriorityRequest& p) -> PinReply { return self->state.batch->set_priority(p); },
      [self](TreeRequest& t) -> TreeReply { return self->state.batch->tree(t); },
      [](expire_atom) -> caf::delegated<void> { return {}; },  // arm_pin_expiry: never answered
      [self](caf::get_atom, stats_atom) -> CacheSnapshot { return self->state.batch->snapshot(); },
      [self](caf::get_atom, audit_atom) -> std::string { return self->state.batch->check_invariants(); },
  };
}

}  // namespace

Result<CacheActor> spawn_cache_actor(caf::actor_system& system, BatchEngineConfig config) {
  auto batch = BatchEngine::create(std::move(config));
  if (!batch) return std::unexpected(batch.error());
  auto boxed = std::make_shared<std::unique_ptr<BatchEngine>>(std::move(*batch));
  return CacheActor{system.spawn<caf::detached>(cache_actor, boxed)};
}

}  // namespace arbor::actors

#include "actors/cache_actor.hpp"

#include <set>

namespace arbor::actors {
namespace {

struct CacheState {
  std::unique_ptr<Scheduler> scheduler;
  bool step_pending = false;
  std::set<caf::actor_addr> monitored;
};

using CacheActor = caf::stateful_actor<CacheState>;

// The id of the message's sender, monitored from now on: when it stops, whatever it left
// (queued or live requests, pins) is cancelled. 0 for an anonymous sender.
std::uint64_t monitored_sender(CacheActor* self) {
  auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  if (!sender) return 0;
  if (self->state.monitored.insert(sender).second) self->monitor(sender);
  return sender.id();
}

void schedule_step(CacheActor* self) {
  if (self->state.step_pending || !self->state.scheduler->has_work()) return;
  self->state.step_pending = true;
  self->send(self, step_atom::value);
}

caf::behavior cache_actor(CacheActor* self, std::shared_ptr<std::unique_ptr<Scheduler>> boxed) {
  self->state.scheduler = std::move(*boxed);
  self->set_down_handler([self](caf::down_msg& dm) {
    self->state.monitored.erase(dm.source);
    self->state.scheduler->cancel_owner(dm.source.id());
    schedule_step(self);
  });
  return {
      [self](SeqRequest& req) -> caf::result<SeqResult> {
        auto rp = self->make_response_promise<SeqResult>();
        const std::uint64_t owner = monitored_sender(self);
        Scheduler::TokenFn on_token;
        if (req.listener) {
          caf::actor listener = req.listener;
          on_token = [self, listener](const TokenEvent& ev) { self->send(listener, ev); };
        }
        self->state.scheduler->submit(std::move(req), owner, std::move(on_token),
                                      [rp](SeqResult r) mutable { rp.deliver(std::move(r)); });
        schedule_step(self);
        return rp;
      },
      [self](step_atom) {
        self->state.step_pending = false;
        self->state.scheduler->step();
        schedule_step(self);
      },
      [self](CancelRequest& c) {
        self->state.scheduler->cancel(c.request_id);
        schedule_step(self);
      },
      [self](CancelRun& c) {
        self->state.scheduler->cancel_run(c.run_id);
        schedule_step(self);
      },
      [self](PinRequest& p) -> PinReply { return self->state.scheduler->pin(p, monitored_sender(self)); },
      [self](UnpinRequest& u) {
        self->state.scheduler->unpin(u.pin_id);
        schedule_step(self);  // pinned pages may now be evictable for a queued request
      },
      [self](PriorityRequest& p) -> PinReply { return self->state.scheduler->set_priority(p); },
      [self](TreeRequest& t) -> TreeReply { return self->state.scheduler->tree(t); },
      [self](caf::get_atom, stats_atom) -> CacheSnapshot { return self->state.scheduler->snapshot(); },
      [self](caf::get_atom, audit_atom) -> std::string { return self->state.scheduler->check_invariants(); },
  };
}

}  // namespace

Result<caf::actor> spawn_cache_actor(caf::actor_system& system, SchedulerConfig config) {
  auto scheduler = Scheduler::create(std::move(config));
  if (!scheduler) return std::unexpected(scheduler.error());
  auto boxed = std::make_shared<std::unique_ptr<Scheduler>>(std::move(*scheduler));
  return system.spawn<caf::detached>(cache_actor, boxed);
}

}  // namespace arbor::actors

#include "actors/run_actor.hpp"

#include <chrono>
#include <deque>
#include <set>

#include "actors/agent.hpp"

namespace arbor::actors {
namespace {

using Clock = std::chrono::steady_clock;

struct Waiter {
  std::vector<std::string> ids;
  caf::typed_response_promise<DepsReply> promise;
};

// The run's sequence requests on their way to the cache actor (see backpressure above).
struct Outbox {
  struct Waiting {
    SeqRequest request;
    caf::typed_response_promise<SeqResult> promise;
  };
  std::deque<Waiting> waiting;
  std::size_t at_cache = 0;  // sent, not yet answered
};

struct RunState {
  std::shared_ptr<const RunEnv> env;
  std::shared_ptr<RunSink> sink;
  Clock::time_point start;
  std::vector<AgentActor> roots;
  std::set<std::string> root_ids;
  std::map<caf::actor_addr, std::string> root_of;
  std::size_t roots_done = 0;
  std::map<std::string, AgentReport> reports;
  std::vector<Waiter> waiters;
  Outbox outbox;
  bool finalizing = false;
  std::string first_error;
};

using RunSelf = RunActor::stateful_pointer<RunState>;

// nullopt while some id is still running.
std::optional<DepsReply> resolve(const RunState& s, const std::vector<std::string>& ids) {
  DepsReply reply;
  reply.ok = true;
  for (const auto& id : ids) {
    auto it = s.reports.find(id);
    if (it == s.reports.end() || it->second.status == AgentStatus::cancelled) return std::nullopt;
    if (it->second.status != AgentStatus::ok) {
      reply.ok = false;
      reply.error = "dependency '" + id + "' " + to_string(it->second.status) + ": " + it->second.error;
      return reply;
    }
    reply.ids.push_back(id);
    reply.outputs.push_back(it->second.output);
  }
  return reply;
}

void answer_waiters(RunSelf self) {
  auto& s = self->state;
  std::erase_if(s.waiters, [&](Waiter& w) {
    auto r = resolve(s, w.ids);
    if (!r) return false;
    w.promise.deliver(std::move(*r));
    return true;
  });
}

SeqResult cancelled_result(std::uint64_t request_id) {
  SeqResult r;
  r.request_id = request_id;
  r.finish_reason = FinishReason::cancelled;
  return r;
}

// Sends waiting requests while the run has room at the cache actor.
void dispatch(RunSelf self) {
  auto& s = self->state;
  auto& out = s.outbox;
  while (!s.finalizing && !out.waiting.empty() && out.at_cache < s.env->max_requests_at_cache) {
    Outbox::Waiting w = std::move(out.waiting.front());
    out.waiting.pop_front();
    ++out.at_cache;
    auto answered = [self] {
      --self->state.outbox.at_cache;
      dispatch(self);
    };
    self->request(s.env->cache, caf::infinite, std::move(w.request))
        .then(
            [rp = w.promise, answered](SeqResult& r) mutable {
              rp.deliver(std::move(r));
              answered();
            },
            [rp = w.promise, answered](caf::error& e) mutable {
              rp.deliver(std::move(e));
              answered();
            });
  }
}

caf::result<SeqResult> on_request(RunSelf self, SeqRequest& req) {
  auto& s = self->state;
  if (s.finalizing) {
    SeqResult r = cancelled_result(req.request_id);
    r.ok = false;
    r.error_code = std::int32_t(ErrorCode::cancelled);
    r.error = "run '" + s.env->run_id + "' is over; request refused";
    return r;
  }
  auto rp = self->make_response_promise<SeqResult>();
  s.outbox.waiting.push_back(Outbox::Waiting{std::move(req), rp});
  dispatch(self);
  return rp;
}

void on_cancel(RunSelf self, const CancelRequest& c) {
  auto& waiting = self->state.outbox.waiting;
  auto it = std::find_if(waiting.begin(), waiting.end(),
                         [&](const Outbox::Waiting& w) { return w.request.request_id == c.request_id; });
  if (it == waiting.end()) return self->send(self->state.env->cache, c);  // already at the cache actor
  it->promise.deliver(cancelled_result(c.request_id));
  waiting.erase(it);
}

void finalize(RunSelf self, RunStatus status, const std::string& error) {
  auto& s = self->state;
  if (s.finalizing) return;
  s.finalizing = true;
  for (auto& root : s.roots) self->send_exit(root, caf::exit_reason::user_shutdown);
  for (auto& w : s.waiters)
    w.promise.deliver(DepsReply{false, std::string("the run ended (") + to_string(status) + ")", {}, {}});
  s.waiters.clear();
  for (auto& w : s.outbox.waiting) w.promise.deliver(cancelled_result(w.request.request_id));
  s.outbox.waiting.clear();
  self->send(s.env->cache, CancelRun{s.env->run_id});
  const double wall = std::chrono::duration<double, std::milli>(Clock::now() - s.start).count();
  auto done = [self, status, error, wall](const CacheSnapshot& snap) {
    auto& st = self->state;
    RunEvent ev{RunEvent::Kind::run_finished, "", "", status, &snap};
    st.sink->on_event(ev);
    st.sink->on_finished(status, error, wall, snap);
    self->quit();
  };
  self->request(s.env->cache, caf::infinite, caf::get_atom::value, stats_atom::value)
      .then([done](CacheSnapshot& snap) { done(snap); }, [done](caf::error&) { done(CacheSnapshot{}); });
}

void on_report(RunSelf self, AgentReport& r) {
  auto& s = self->state;
  if (s.finalizing) return;
  s.reports[r.id] = r;
  s.sink->on_agent(r);
  answer_waiters(self);
  // Await keeps events in order: nothing else is handled until the snapshot arrives.
  self->request(s.env->cache, caf::infinite, caf::get_atom::value, stats_atom::value)
      .await([self, r](CacheSnapshot& snap) {
        auto& st = self->state;
        if (st.finalizing) return;
        st.sink->on_event(RunEvent{RunEvent::Kind::agent_finished, r.id, r.output, r.status, &snap, nullptr});
        if (!st.root_ids.contains(r.id)) return;
        if (r.status != AgentStatus::ok) return finalize(self, RunStatus::failed, r.error);
        if (++st.roots_done == st.root_ids.size()) finalize(self, RunStatus::ok, "");
      });
}

RunActor::behavior_type run_actor(RunSelf self, std::shared_ptr<RunEnv> env, std::shared_ptr<RunSink> sink) {
  auto& s = self->state;
  s.env = env;
  s.sink = std::move(sink);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    auto it = st.root_of.find(dm.source);
    // Roots report before they quit; a root that did not report crashed.
    if (it == st.root_of.end() || st.reports.contains(it->second)) return;
    finalize(self, RunStatus::failed,
             "agent '" + it->second + "' stopped without reporting (" + self->system().render(dm.reason) + ")");
  });
  return {
      [self](start_atom) {
        auto& st = self->state;
        st.start = Clock::now();
        st.sink->on_event(RunEvent{RunEvent::Kind::run_started, "", "", RunStatus::running, nullptr, nullptr});
        if (st.env->plan->agents.empty()) return finalize(self, RunStatus::ok, "");
        for (const auto& plan : st.env->plan->agents) {
          st.root_ids.insert(plan.id);
          st.roots.push_back(spawn_agent(self, st.env, &plan, RunActor{self}, ReportListener()));
          st.root_of[st.roots.back().address()] = plan.id;
        }
      },
      [self](cancel_atom) { finalize(self, RunStatus::cancelled, "the run was cancelled"); },
      [self](AgentStarted& a) {
        if (self->state.finalizing) return;
        self->state.sink->on_event(
            RunEvent{RunEvent::Kind::agent_started, a.id, "", AgentStatus::running, nullptr, nullptr});
      },
      [self](TokenEvent& t) {
        if (self->state.finalizing) return;
        self->state.sink->on_event(RunEvent{RunEvent::Kind::token, t.tag, t.text, {}, nullptr, nullptr});
      },
      [self](ToolEvent& t) {
        if (self->state.finalizing) return;
        const auto kind = t.result ? RunEvent::Kind::tool_result : RunEvent::Kind::tool_call;
        const EventStatus status = t.result ? EventStatus(t.status) : EventStatus();  // a call has none yet
        self->state.sink->on_event(RunEvent{kind, t.agent_id, t.arguments, status, nullptr, &t});
      },
      [self](AgentReport& r) { on_report(self, r); },
      [self](SeqRequest& req) { return on_request(self, req); },
      [self](CancelRequest& c) { on_cancel(self, c); },
      [self](DepsRequest& d) -> caf::result<DepsReply> {
        auto& st = self->state;
        if (auto r = resolve(st, d.ids)) return *r;
        if (st.finalizing) return DepsReply{false, "the run ended", {}, {}};
        auto rp = self->make_response_promise<DepsReply>();
        st.waiters.push_back(Waiter{d.ids, rp});
        return rp;
      },
  };
}

}  // namespace

RunActor spawn_run_actor(caf::actor_system& system, std::shared_ptr<RunEnv> env,
                         std::shared_ptr<RunSink> sink) {
  return system.spawn(run_actor, std::move(env), std::move(sink));
}

}  // namespace arbor::actors

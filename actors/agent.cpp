#include "actors/agent.hpp"

#include <algorithm>
#include <chrono>
#include <optional>

#include "actors/conversation.hpp"
#include "actors/messages.hpp"
#include "actors/tool_loop.hpp"
#include "workflows/dynamic_fan_out.hpp"

namespace arbor::actors {
namespace {

using Clock = std::chrono::steady_clock;

enum class Stage { turn0, warm, children, fan_in, turns };

struct AgentState {
  std::shared_ptr<const RunEnv> env;
  const workflows::AgentPlan* plan = nullptr;
  std::shared_ptr<const workflows::AgentPlan> owned;  // a dynamic fan-out instance's plan
  RunActor run;
  ReportListener parent;  // null for a root agent
  bool started = false, finished = false;
  Clock::time_point start;
  int attempt = 0;
  // Per attempt:
  Stage stage = Stage::turn0;
  std::map<std::string, std::string> dep_outputs;  // from depends_on (kept across attempts)
  std::map<std::string, std::string> outputs;      // dep outputs + children outputs
  std::vector<AgentActor> children;
  std::vector<std::string> child_ids;  // the sub-agents spawned this attempt, in order
  std::size_t children_pending = 0;
  std::optional<Conversation> conv;
  std::vector<std::int32_t> last_ids;
  std::string last_output;
  std::size_t next_turn = 0;
  std::uint64_t inflight = 0;
  std::uint64_t pin = 0;
  AgentReport report;
  std::unique_ptr<ToolLoop> tools;  // with plan->tools: this attempt's tool calls (declared last: it refers to env, report)
};

// The interface plus the agent's own timers, requests to itself that are never
// answered: (start_atom) begins it, (timeout_atom, attempt) is an attempt's deadline,
// (tool_atom, call id) a tool call's (ToolLoop). spawn_agent hands out only the
// AgentActor part.
using AgentActorImpl = AgentActor::extend<caf::reacts_to<start_atom>, caf::reacts_to<timeout_atom, int>,
                                          caf::reacts_to<tool_atom, std::uint64_t>>;
using AgentSelf = AgentActorImpl::stateful_pointer<AgentState>;

void begin_attempt(AgentSelf self);
void advance(AgentSelf self);

const std::string& prefix_text(const AgentState& s) {
  static const std::string empty;
  if (s.plan->prefix_id.empty()) return empty;
  auto it = s.env->plan->prefixes.find(s.plan->prefix_id);
  return it == s.env->plan->prefixes.end() ? empty : it->second.text;
}

Result<std::string> render(AgentSelf self, const workflows::Template& tmpl) {
  auto& s = self->state;
  const bool spawned = s.stage == Stage::children || s.stage == Stage::fan_in || s.stage == Stage::turns;
  auto ctx = workflows::make_context(*s.env->plan, *s.plan, s.outputs, spawned ? &s.child_ids : nullptr);
  // {{previous}}: the last turn's output, in follow-up turns and in a fan_in after a task.
  if (s.stage == Stage::turns || s.stage == Stage::fan_in) ctx.previous = s.last_output;
  return tmpl.render(ctx);
}

// Ends the current attempt's activity: request, children, pin.
void cleanup_attempt(AgentSelf self) {
  auto& s = self->state;
  if (s.inflight != 0) self->send(s.run, CancelRequest{s.inflight});  // requests go through the run
  s.inflight = 0;
  for (auto& child : s.children) self->send_exit(child, caf::exit_reason::user_shutdown);
  s.children.clear();
  s.child_ids.clear();
  s.children_pending = 0;
  if (s.pin != 0) self->send(s.env->cache, UnpinRequest{s.pin});
  s.pin = 0;
}

void finish(AgentSelf self, AgentStatus status, const std::string& error) {
  auto& s = self->state;
  if (s.finished) return;
  s.finished = true;
  cleanup_attempt(self);
  s.report.id = s.plan->id;
  s.report.parent = s.plan->parent_id;
  s.report.status = status;
  s.report.output = status == AgentStatus::ok ? s.last_output : std::string();
  if (status != AgentStatus::ok) s.report.json.clear();
  s.report.error = error;
  s.report.attempts = s.attempt;
  if (s.started) s.report.duration_ms = std::chrono::duration<double, std::milli>(Clock::now() - s.start).count();
  // The run actor hears first: whatever the parent does next (its fan_in may fetch
  // this report from the run actor) reaches the run actor after this report.
  self->send(s.run, s.report);
  if (s.parent) self->send(s.parent, s.report);
  self->quit();
}

void attempt_failed(AgentSelf self, const std::string& reason, bool timed_out) {
  auto& s = self->state;
  cleanup_attempt(self);
  if (s.attempt <= s.plan->max_retries) {
    begin_attempt(self);
    return;
  }
  finish(self, timed_out ? AgentStatus::timeout : AgentStatus::failed,
         "agent '" + s.plan->id + "' failed after " + std::to_string(s.attempt) + " attempt" +
             (s.attempt == 1 ? "" : "s") + ": " + reason);
}

// Sends `req` (its prompt, sampling and json_schema set) to the cache actor through the
// run actor (which applies backpressure), as this agent's; `then` runs with a
// successful result of this attempt.
void send_request(AgentSelf self, SeqRequest req, std::function<void(AgentSelf, SeqResult&)> then) {
  auto& s = self->state;
  req.request_id = next_request_id();
  req.tenant = s.env->tenant;
  req.run_id = s.env->run_id;
  req.tag = s.plan->id;
  if (s.env->stream_tokens && req.sampling.max_tokens > 0) req.listener = s.run;
  s.inflight = req.request_id;
  const int attempt = s.attempt;
  self->request(s.run, caf::infinite, std::move(req))
      .then(
          [self, attempt, then](SeqResult& r) {
            auto& st = self->state;
            if (st.finished || attempt != st.attempt) {
              if (r.pin_id != 0) self->send(st.env->cache, UnpinRequest{r.pin_id});  // nobody continues it
              return;
            }
            st.inflight = 0;
            if (!r.ok) return attempt_failed(self, r.error, false);
            if (r.finish_reason == FinishReason::cancelled)
              return attempt_failed(self, "its request was cancelled", false);
            if (r.finish_reason == FinishReason::prefill) {
              st.report.warmup_tokens += r.computed_tokens;  // a warm-up, not a turn
            } else {
              st.report += r.usage();
            }
            then(self, r);
          },
          [self, attempt](caf::error& e) {
            if (self->state.finished || attempt != self->state.attempt) return;
            self->state.inflight = 0;
            attempt_failed(self, "cache actor error: " + self->system().render(e), false);
          });
}

// Whether the turn about to be sent is the agent's last (its output): see the
// execution contract in workflows/plan.hpp and advance() below.
bool is_final_turn(const AgentState& s) {
  switch (s.stage) {
    case Stage::turn0: return !s.plan->fan_in && s.plan->turns.empty();
    case Stage::fan_in: return s.plan->turns.empty();
    case Stage::turns: return s.next_turn == s.plan->turns.size();
    default: return false;
  }
}

void on_turn_result(AgentSelf self, bool constrained, SeqResult& r);

void send_turn(AgentSelf self) {
  auto& s = self->state;
  SeqRequest req;
  req.sampling = s.plan->generation;
  const bool constrained = !s.plan->output_schema.empty() && is_final_turn(s);
  if (constrained) req.json_schema = s.plan->output_schema;
  if (s.tools)
    return s.tools->turn(*s.conv, std::move(req),
                         [self, constrained](SeqResult& r) { on_turn_result(self, constrained, r); });
  req.prompt = s.conv->prompt();
  send_request(self, std::move(req),
               [constrained](AgentSelf self, SeqResult& r) { on_turn_result(self, constrained, r); });
}

// A turn's answer (after its tool calls, if any).
void on_turn_result(AgentSelf self, bool constrained, SeqResult& r) {
  auto& st = self->state;
  if (st.report.ttft_ms == 0) st.report.ttft_ms = r.ttft_ms;
  if (constrained && r.json.empty())
    return attempt_failed(self,
                          "its output is not a complete JSON document valid against output_schema (generation "
                          "ended after " + std::to_string(r.generated_tokens) + " tokens, finish_reason '" +
                              to_string(r.finish_reason) + "'); raise generation.max_tokens",
                          false);
  st.report.json = r.json;
  st.last_output = r.text;
  st.last_ids = r.tokens;
  advance(self);
}

// Starts the conversation, or continues it, with the user message `text`.
void turn(AgentSelf self, const std::string& text) {
  auto& s = self->state;
  if (s.conv) {
    s.conv->add_turn(s.last_ids, s.last_output, text);
  } else {
    s.conv.emplace(s.env->model->tokenizer(), *s.env->chat);
    const std::string& prefix = prefix_text(s);
    if (s.plan->layout == workflows::Layout::task_first)
      s.conv->start("", prefix.empty() ? text : text + "\n\n" + prefix, s.tools ? s.tools->system_text() : std::string());
    else
      s.conv->start(prefix, text, s.tools ? s.tools->system_text() : std::string());
  }
  send_turn(self);
}

// Ids of the {{outputs.ID}} instances `tmpl` reads that this agent has not received
// itself (it receives its depends_on and its sub-agents' outputs): a transitive
// dependency, an ancestor's dependency, a sub-agent's sub-agent. The validator
// guarantees each has finished when `tmpl` renders; the run actor holds their reports.
std::vector<std::string> missing_outputs(const AgentState& s, const workflows::Template& tmpl) {
  std::vector<std::string> out;
  for (const auto& v : tmpl.variables()) {
    if (v.kind != workflows::VarKind::output) continue;
    auto it = s.plan->output_sources.find(v.name);
    if (it == s.plan->output_sources.end()) continue;
    for (const auto& id : it->second)
      if (!s.outputs.contains(id) && std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  }
  return out;
}

void render_and_turn(AgentSelf self, const workflows::Template& tmpl);

// Asks the run actor for finished outputs this agent lacks, then continues with `then`.
void fetch_outputs(AgentSelf self, std::vector<std::string> ids, std::function<void(AgentSelf)> then) {
  auto& s = self->state;
  const int attempt = s.attempt;
  self->request(s.run, caf::infinite, DepsRequest{std::move(ids)})
      .then(
          [self, attempt, then](DepsReply& r) {
            auto& st = self->state;
            if (st.finished || attempt != st.attempt) return;
            if (!r.ok) return finish(self, AgentStatus::failed, "agent '" + st.plan->id + "': " + r.error);
            for (std::size_t i = 0; i < r.ids.size(); ++i) st.outputs[r.ids[i]] = r.outputs[i];
            then(self);
          },
          [self, attempt](caf::error& e) {
            if (self->state.finished || attempt != self->state.attempt) return;
            finish(self, AgentStatus::failed,
                   "agent '" + self->state.plan->id + "': reading outputs failed: " + self->system().render(e));
          });
}

void render_and_turn(AgentSelf self, const workflows::Template& tmpl) {
  if (auto missing = missing_outputs(self->state, tmpl); !missing.empty())
    return fetch_outputs(self, std::move(missing), [&tmpl](AgentSelf self) { render_and_turn(self, tmpl); });
  auto text = render(self, tmpl);
  if (!text) return finish(self, AgentStatus::failed, "agent '" + self->state.plan->id + "': " + text.error().message);
  turn(self, *text);
}

std::vector<std::int32_t> prefix_ids(AgentSelf self) {
  auto& s = self->state;
  if (prefix_text(s).empty() || s.plan->layout == workflows::Layout::task_first) return {};
  if (s.conv) return s.conv->system_ids();
  Conversation c(s.env->model->tokenizer(), *s.env->chat);
  c.start(prefix_text(s), "");
  return c.system_ids();
}

void pin_prefix(AgentSelf self) {
  auto& s = self->state;
  auto ids = prefix_ids(self);
  if (ids.empty()) return;
  const int attempt = s.attempt;
  self->request(s.env->cache, caf::infinite, PinRequest{s.env->tenant, s.env->run_id, std::move(ids), 1})
      .then(
          [self, attempt](PinReply& r) {
            auto& st = self->state;
            if (!r.ok) return;  // best effort: nothing cached to pin, or over the pin cap
            if (st.finished || attempt != st.attempt || st.children_pending == 0)
              self->send(st.env->cache, UnpinRequest{r.pin_id});
            else
              st.pin = r.pin_id;
          },
          [](caf::error&) {});
}

// The source agents of this agent's dynamic fan-outs (for_each.output) whose outputs it
// has not received itself; the validator guarantees they have finished by now.
std::vector<std::string> missing_sources(const AgentState& s) {
  std::vector<std::string> out;
  for (const auto& c : s.plan->children)
    if (c.dynamic && !s.outputs.contains(c.dynamic->source)) out.push_back(c.dynamic->source);
  return out;
}

AgentActor spawn_owned(caf::local_actor* spawner, std::shared_ptr<const RunEnv> env,
                       std::shared_ptr<const workflows::AgentPlan> plan, RunActor run, ReportListener parent);

// The children to spawn, in order: static ones point into the plan; each dynamic
// template becomes its instances (owned by the child actors, which may outlive this one).
struct ChildPlan {
  const workflows::AgentPlan* plan;
  std::shared_ptr<const workflows::AgentPlan> owned;
};

void spawn_children(AgentSelf self) {
  auto& s = self->state;
  s.stage = Stage::children;
  if (auto missing = missing_sources(s); !missing.empty())
    return fetch_outputs(self, std::move(missing), [](AgentSelf self) { spawn_children(self); });
  std::vector<ChildPlan> plans;
  for (const auto& child : s.plan->children) {
    if (!child.dynamic) {
      plans.push_back({&child, nullptr});
      continue;
    }
    auto instances = workflows::expand_dynamic(child, s.outputs.at(child.dynamic->source));
    // Final, no retry: the source's output does not change.
    if (!instances)
      return finish(self, AgentStatus::failed, "agent '" + s.plan->id + "': " + instances.error().message);
    for (auto& a : *instances) plans.push_back({nullptr, std::make_shared<const workflows::AgentPlan>(std::move(a))});
  }
  if (!plans.empty()) pin_prefix(self);  // sent before the children exist, so it reaches the cache first
  const ReportListener me{self};
  for (auto& c : plans) {
    s.child_ids.push_back(c.owned ? c.owned->id : c.plan->id);
    s.children.push_back(c.owned ? spawn_owned(self, s.env, std::move(c.owned), s.run, me)
                                 : spawn_agent(self, s.env, c.plan, s.run, me));
  }
  s.children_pending = s.children.size();
  if (plans.empty()) advance(self);  // an empty dynamic fan-out: on to the fan_in
}

void warm_prefix(AgentSelf self) {
  auto& s = self->state;
  s.stage = Stage::warm;
  SeqRequest prefill_only;
  prefill_only.prompt = prefix_ids(self);
  prefill_only.sampling.max_tokens = 0;
  send_request(self, std::move(prefill_only), [](AgentSelf self, SeqResult&) { spawn_children(self); });
}

// Moves to the next step of the execution contract after a finished turn.
void advance(AgentSelf self) {
  auto& s = self->state;
  if (s.stage == Stage::turn0 && !s.plan->children.empty()) return spawn_children(self);
  if (s.stage == Stage::children && s.plan->fan_in) {
    s.stage = Stage::fan_in;
    return render_and_turn(self, *s.plan->fan_in);
  }
  s.stage = Stage::turns;
  if (s.next_turn < s.plan->turns.size()) return render_and_turn(self, s.plan->turns[s.next_turn++]);
  finish(self, AgentStatus::ok, "");
}

void on_deadline(AgentSelf self, int attempt) {
  auto& s = self->state;
  if (s.finished || attempt != s.attempt) return;
  attempt_failed(self, "timed out after " + std::to_string(s.plan->timeout_ms) + " ms", true);
}

// The attempt's deadline is a request to itself that is never answered, so that CAF's
// request timeout fires after timeout_ms. Not a delayed_send: its pending message would
// keep a stopped agent's actor alive until it is due (timeout_ms, 120 s by default),
// kilobytes per agent; a request timeout is dropped as soon as the actor stops.
void arm_deadline(AgentSelf self) {
  const int attempt = self->state.attempt;
  self->request(AgentActorImpl{self}, std::chrono::milliseconds(self->state.plan->timeout_ms),
                timeout_atom::value, attempt)
      .then([] {}, [self, attempt](caf::error&) { on_deadline(self, attempt); });
}

void begin_attempt(AgentSelf self) {
  auto& s = self->state;
  ++s.attempt;
  s.stage = Stage::turn0;
  s.outputs = s.dep_outputs;
  s.conv.reset();
  s.last_ids.clear();
  s.last_output.clear();
  s.next_turn = 0;
  s.tools.reset();
  if (!s.plan->tools.empty())
    s.tools = std::make_unique<ToolLoop>(
        ToolDoneListener{self}, *s.env, *s.plan, s.report,
        [self](SeqRequest req, ToolLoop::Then then) {
          send_request(self, std::move(req), [then = std::move(then)](AgentSelf, SeqResult& r) { then(r); });
        },
        [self](const std::string& reason) { attempt_failed(self, reason, false); },
        [self](ToolEvent e) {
          e.agent_id = self->state.plan->id;
          self->send(self->state.run, std::move(e));
        },
        // A request to itself that is never answered: its timeout is the tool's
        // deadline (dropped when the actor stops, unlike a delayed message).
        [self](std::uint64_t call_id, std::chrono::milliseconds timeout, std::function<void()> passed) {
          self->request(AgentActorImpl{self}, timeout, tool_atom::value, call_id)
              .then([] {}, [passed = std::move(passed)](caf::error&) { passed(); });
        });
  arm_deadline(self);
  const auto& faults = s.env->faults;
  if (auto it = faults.fail_attempts.find(s.plan->id); it != faults.fail_attempts.end() && s.attempt <= it->second)
    return attempt_failed(self, "injected fault on attempt " + std::to_string(s.attempt), false);
  if (auto it = faults.hang_attempts.find(s.plan->id); it != faults.hang_attempts.end() && s.attempt <= it->second)
    return;  // the timeout ends this attempt
  if (s.plan->task) return render_and_turn(self, *s.plan->task);
  if (s.plan->children.empty()) return advance(self);
  if (s.env->warm_prefixes && !prefix_ids(self).empty()) return warm_prefix(self);
  spawn_children(self);
}

void on_child_report(AgentSelf self, AgentReport& r) {
  auto& s = self->state;
  const auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  auto it = std::find_if(s.children.begin(), s.children.end(),
                         [&](const AgentActor& child) { return child.address() == sender; });
  if (s.finished || it == s.children.end()) return;  // a stale child of an earlier attempt
  s.children.erase(it);
  --s.children_pending;
  if (r.status != AgentStatus::ok) {
    s.attempt = s.plan->max_retries + 1;  // a child's failure is final: it used its own retries
    return finish(self, AgentStatus::failed,
                  "agent '" + s.plan->id + "' failed because sub-agent '" + r.id + "' " +
                      (r.status == AgentStatus::timeout ? "timed out" : to_string(r.status)) + ": " + r.error);
  }
  s.outputs[r.id] = r.output;
  if (s.children_pending > 0) return;
  if (s.pin != 0) self->send(s.env->cache, UnpinRequest{s.pin});
  s.pin = 0;
  advance(self);
}

AgentActorImpl::behavior_type agent_actor(AgentSelf self, std::shared_ptr<const RunEnv> env,
                                          const workflows::AgentPlan* plan, RunActor run, ReportListener parent,
                                          std::shared_ptr<const workflows::AgentPlan> owned) {
  auto& s = self->state;
  s.env = std::move(env);
  s.plan = plan;
  s.owned = std::move(owned);
  s.run = std::move(run);
  s.parent = std::move(parent);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& st = self->state;
    // A child that reported was removed from `children` already; this one died silently.
    for (auto& child : st.children) {
      if (child.address() != dm.source) continue;
      st.attempt = st.plan->max_retries + 1;
      return finish(self, AgentStatus::failed,
                    "agent '" + st.plan->id + "' failed: a sub-agent stopped without reporting (" +
                        self->system().render(dm.reason) + ")");
    }
  });
  self->set_exit_handler([self](caf::exit_msg& em) {
    finish(self, AgentStatus::cancelled,
           "agent '" + self->state.plan->id + "' was stopped: " + self->system().render(em.reason));
  });
  self->send(self, start_atom::value);
  return {
      [self](start_atom) {
        auto& st = self->state;
        auto go = [self] {
          auto& st = self->state;
          st.started = true;
          st.start = Clock::now();
          self->send(st.run, AgentStarted{st.plan->id});
          begin_attempt(self);
        };
        if (st.plan->depends_on.empty()) return go();
        self->request(st.run, caf::infinite, DepsRequest{st.plan->depends_on})
            .then(
                [self, go](DepsReply& r) {
                  if (!r.ok)
                    return finish(self, AgentStatus::failed, "agent '" + self->state.plan->id + "': " + r.error);
                  for (std::size_t i = 0; i < r.ids.size(); ++i) self->state.dep_outputs[r.ids[i]] = r.outputs[i];
                  go();
                },
                [self](caf::error& e) {
                  finish(self, AgentStatus::failed,
                         "agent '" + self->state.plan->id +
                             "': waiting for dependencies failed: " + self->system().render(e));
                });
      },
      [](timeout_atom, int) -> caf::delegated<void> { return {}; },  // arm_deadline: never answered
      [](tool_atom, std::uint64_t) -> caf::delegated<void> { return {}; },  // a tool's deadline: never answered
      [self](ToolDone& d) {
        if (self->state.tools) self->state.tools->on_done(d);
      },
      [self](AgentReport& r) { on_child_report(self, r); },
  };
}

}  // namespace

AgentActor spawn_agent(caf::local_actor* spawner, std::shared_ptr<const RunEnv> env,
                       const workflows::AgentPlan* plan, RunActor run, ReportListener parent) {
  return spawner->spawn<caf::monitored>(agent_actor, std::move(env), plan, std::move(run), std::move(parent),
                                       std::shared_ptr<const workflows::AgentPlan>());
}

namespace {
AgentActor spawn_owned(caf::local_actor* spawner, std::shared_ptr<const RunEnv> env,
                       std::shared_ptr<const workflows::AgentPlan> plan, RunActor run, ReportListener parent) {
  const workflows::AgentPlan* p = plan.get();
  return spawner->spawn<caf::monitored>(agent_actor, std::move(env), p, std::move(run), std::move(parent),
                                       std::move(plan));
}
}  // namespace

}  // namespace arbor::actors

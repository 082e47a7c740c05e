// RunHandle, GenerationHandle and the sinks their actors report into.
#include <chrono>

#include "runtime/runtime_impl.hpp"

namespace arbor {

namespace {

std::optional<nlohmann::ordered_json> parse_document(const std::string& json) {
  if (json.empty()) return std::nullopt;
  auto value = nlohmann::ordered_json::parse(json, nullptr, false);  // valid: the scheduler checked it
  if (value.is_discarded()) return std::nullopt;
  return value;
}

}  // namespace

AgentResult to_agent_result(const actors::AgentReport& r) {
  AgentResult a;
  a.id = r.id;
  a.parent = r.parent;
  a.status = r.status;
  a.output = r.output;
  a.usage() = r.usage();
  a.warmup_tokens = r.warmup_tokens;
  a.attempts = r.attempts;
  a.ttft_ms = r.ttft_ms;
  a.duration_ms = r.duration_ms;
  a.error = r.error;
  a.json = parse_document(r.json);
  a.tool_calls = r.tool_calls;
  a.tool_ms = r.tool_ms;
  a.tool_recomputed_tokens = r.tool_recomputed_tokens;
  for (const auto& c : r.tool_trace) a.tool_trace.push_back({c.name, c.arguments, c.status, c.result, c.ms});
  return a;
}

GenerateResult to_generate_result(const actors::SeqResult& r) {
  GenerateResult g;
  g.text = r.text;
  g.tokens.assign(r.tokens.begin(), r.tokens.end());
  g.usage() = r.usage();
  g.ttft_ms = r.ttft_ms;
  g.prefill_ms = r.prefill_ms;
  g.decode_ms = r.decode_ms;
  g.finish_reason = r.finish_reason;
  g.json = parse_document(r.json);
  return g;
}

// --- RunHandle ---

void RunHandle::State::note_instance(const std::string& id) {
  const std::size_t open = id.rfind('[');
  if (open == std::string::npos || id.back() != ']') return;
  const workflows::AgentPlan* t = plan->find(id.substr(0, open));
  if (!t || !t->dynamic) return;
  dynamic_instances[t->id].insert(std::stoul(id.substr(open + 1, id.size() - open - 2)));
}

void RunHandle::State::on_event(const actors::RunEvent& e) {
  if (e.kind == actors::RunEvent::Kind::agent_started) {
    std::lock_guard lock(mu);
    note_instance(e.agent_id);
  }
  if (!callback) return;
  Event ev;
  ev.kind = Event::Kind(int(e.kind));
  ev.run_id = result.run_id;  // immutable after start
  ev.agent_id = e.agent_id;
  ev.text = e.text;
  ev.status = e.status;
  if (e.cache) ev.cache = *e.cache;  // its public part
  if (e.tool) {
    ev.tool = e.tool->tool;
    ev.tool_ms = e.tool->ms;
    ev.tool_bytes = e.tool->bytes;
  }
  callback(ev);
}

void RunHandle::State::on_agent(const actors::AgentReport& report) {
  std::lock_guard lock(mu);
  agents[report.id] = to_agent_result(report);
  note_instance(report.id);
}

void RunHandle::State::on_finished(RunStatus status, const std::string& error, double wall_ms,
                                   const actors::CacheSnapshot&) {
  // No event follows: let go of the callback, which may own what owns this handle (the
  // server's run entry holds the handle and its callback holds the entry).
  callback = nullptr;
  {
    std::lock_guard lock(mu);
    result.status = status;
    result.error = error;
    result.wall_ms = wall_ms;
    finished = true;
    run_actor = nullptr;
  }
  cv.notify_all();
}

RunResult RunHandle::State::current() const {
  RunResult r = result;
  if (!finished)
    r.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  auto add = [&](const std::string& id, const std::string& parent) {
    auto it = agents.find(id);
    if (it != agents.end()) {
      r.agents.push_back(it->second);
      return;
    }
    AgentResult a;
    a.id = id;
    a.parent = parent;
    a.status = finished && result.status == RunStatus::cancelled ? AgentStatus::cancelled : AgentStatus::pending;
    if (finished) a.error = std::string("did not run to completion (run ") + to_string(result.status) + ")";
    r.agents.push_back(a);
  };
  plan->visit([&](const workflows::AgentPlan& p) {
    if (!p.dynamic) return add(p.id, p.parent_id);
    // A dynamic fan-out template: its instances seen so far, in index order (none
    // before its parent spawned them, or for an empty list).
    if (auto it = dynamic_instances.find(p.id); it != dynamic_instances.end())
      for (std::size_t i : it->second) add(p.id + "[" + std::to_string(i) + "]", p.parent_id);
  });
  return r;
}

const std::string& RunHandle::id() const { return state_->result.run_id; }

bool RunHandle::done() const {
  std::lock_guard lock(state_->mu);
  return state_->finished;
}

RunResult RunHandle::wait() {
  std::unique_lock lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->finished; });
  return state_->current();
}

RunResult RunHandle::snapshot() const {
  std::lock_guard lock(state_->mu);
  return state_->current();
}

void RunHandle::cancel() {
  actors::RunActor run;
  {
    std::lock_guard lock(state_->mu);
    run = state_->run_actor;
  }
  if (run) caf::anon_send(run, actors::cancel_atom::value);
}

// --- GenerationHandle ---

void GenerationHandle::State::complete(const actors::SeqResult& r, std::vector<ChatToolCall> calls) {
  GenerationDone done;
  {
    std::lock_guard lock(mu);
    result = r;
    tool_calls = std::move(calls);
    finished = true;
    cache = nullptr;
    done = std::move(on_done);  // at most once, and no capture outlives the call
  }
  cv.notify_all();
  if (done) done(outcome());
}

Result<GenerateResult> GenerationHandle::State::outcome() const {
  if (!result.ok) return fail(ErrorCode(result.error_code), result.error);
  GenerateResult g = to_generate_result(result);
  g.tool_calls = tool_calls;
  return g;
}

Result<GenerateResult> GenerationHandle::result() {
  std::unique_lock lock(state_->mu);
  state_->cv.wait(lock, [&] { return state_->finished; });
  return state_->outcome();
}

GenerateResult GenerationHandle::wait() {
  auto r = result();
  if (r) return *r;
  GenerateResult g;
  g.finish_reason = FinishReason::error;
  g.text = r.error().describe();
  return g;
}

void GenerationHandle::cancel() {
  actors::CacheActor cache;
  std::uint64_t id = 0;
  {
    std::lock_guard lock(state_->mu);
    cache = state_->cache;
    id = state_->request_id;
    state_->cancel_requested = true;
  }
  if (cache) caf::anon_send(cache, actors::CancelRequest{id});
}

}  // namespace arbor

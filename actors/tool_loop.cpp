#include "actors/tool_loop.hpp"

#include <algorithm>

#include "actors/tool_call_steps.hpp"
#include "model/tool_format.hpp"

namespace arbor::actors {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// At most kMaxToolResultBytes of a (valid UTF-8) result, cut at a character boundary.
std::string cut_result(std::string text) {
  if (text.size() <= kMaxToolResultBytes) return text;
  const std::size_t total = text.size();
  std::size_t end = kMaxToolResultBytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  text.resize(end);
  return text + "\n[cut: the result has " + std::to_string(total) + " bytes, the first " + std::to_string(end) +
         " are shown]";
}

}  // namespace

ToolLoop::ToolLoop(ToolDoneListener agent, const RunEnv& env, const workflows::AgentPlan& plan,
                   AgentReport& report, Send send, Fail fail, Notify notify, Deadline deadline)
    : agent_(std::move(agent)),
      env_(env),
      plan_(plan),
      report_(report),
      send_(std::move(send)),
      fail_(std::move(fail)),
      notify_(std::move(notify)),
      deadline_(std::move(deadline)) {
  for (const auto& name : plan.tools)
    if (const auto* tool = env.tools ? env.tools->find(name) : nullptr) signatures_.push_back(tool->signature);
  system_text_ = model::tools_system_text(signatures_);
  call_schema_ = model::tool_call_schema(signatures_);
}

ToolLoop::~ToolLoop() {
  if (call_id_ != 0 && env_.tool_runner) env_.tool_runner->forget(call_id_);
  if (pin_ != 0) caf::anon_send(env_.cache, UnpinRequest{pin_});  // the attempt ended during a call
}

void ToolLoop::turn(Conversation& conv, SeqRequest base, Then then) {
  conv_ = &conv;
  base_ = std::move(base);
  then_ = std::move(then);
  forced_ = plan_.tool_required && calls_ < plan_.max_tool_calls;
  round();
}

// Sends through the agent; measures what the first request after a tool result
// prefills beyond its new messages.
void ToolLoop::send(SeqRequest request, std::function<void(ToolLoop&, SeqResult&)> then) {
  const bool measure = std::exchange(after_tool_, false);
  if (measure) request.release_pin = std::exchange(pin_, 0);  // released once this is admitted
  const std::size_t prompt_len = request.prompt.size();
  const std::uint64_t new_tokens = prompt_len > known_len_ ? prompt_len - known_len_ : 0;
  send_(std::move(request),
        [this, alive = std::weak_ptr<int>(alive_), measure, new_tokens, then = std::move(then)](SeqResult& r) {
          if (alive.expired()) return;
          if (measure && r.computed_tokens > new_tokens) report_.tool_recomputed_tokens += r.computed_tokens - new_tokens;
          then(*this, r);
        });
}

void ToolLoop::round() {
  if (std::exchange(forced_, false)) {
    auto head = forced_call_head(env_.model->tokenizer());
    return call(std::move(head.ids), std::move(head.text));
  }
  if (calls_ >= plan_.max_tool_calls) return final_round();
  SeqRequest req = base_;
  req.prompt = conv_->prompt();
  req.json_schema.clear();
  req.sampling.stop.emplace_back(model::kToolCallOpen);
  const std::size_t prompt_len = req.prompt.size();
  send(std::move(req), [prompt_len](ToolLoop& l, SeqResult& r) { l.on_free(r, prompt_len); });
}

// A free round ended: at "<tool_call>" (a call follows), or with an answer.
void ToolLoop::on_free(SeqResult& r, std::size_t prompt_len) {
  if (auto head = find_call_head(env_.model->tokenizer(), r)) {
    known_len_ = prompt_len + head->computed;  // K/V computed: the prompt and every generated id before the last
    return call(std::move(head->ids), std::move(head->text));
  }
  if (!base_.json_schema.empty()) return final_round();
  auto then = then_;  // may end this attempt, and this loop with it
  then(r);
}

void ToolLoop::call(std::vector<std::int32_t> head_ids, std::string head_text) {
  // The agent's sampler settings, for the call's JSON.
  SeqRequest req = call_request(base_, conv_->prompt(), head_ids, call_schema_, kCallTokens);
  req.pin_ttl_ms = env_.tool_pin_ttl_ms;  // the history stays while the tool runs
  const std::size_t prompt_len = req.prompt.size();
  send(std::move(req),
       [head_ids = std::move(head_ids), head_text = std::move(head_text), prompt_len](ToolLoop& l, SeqResult& r) {
         l.on_call(r, head_ids, head_text, prompt_len);
       });
}

void ToolLoop::on_call(SeqResult& r, std::vector<std::int32_t> head_ids, std::string head_text, std::size_t prompt_len) {
  pin_ = r.pin_id;  // held until the continuation is admitted (or this loop goes)
  auto fail = fail_;  // a failed attempt replaces this loop: nothing of it is used after
  if (r.json.empty())
    return fail("its tool call did not complete within " + std::to_string(kCallTokens) + " tokens (finish_reason '" +
                to_string(r.finish_reason) + "')");
  auto parsed = model::parse_tool_call(r.json);
  const workflows::Tool* tool = parsed && env_.tools ? env_.tools->find(parsed->name) : nullptr;
  if (!tool) return fail("its tool call names no tool it may use: " + r.json);
  if (!env_.tool_runner) return fail("its run has no tool runner (RunEnv::tool_runner)");
  reply_ids_ = std::move(head_ids);
  reply_ids_.insert(reply_ids_.end(), r.tokens.begin(), r.tokens.end());
  const auto close = call_tail_ids(env_.model->tokenizer());
  reply_ids_.insert(reply_ids_.end(), close.begin(), close.end());
  reply_text_ = head_text + r.text + std::string(model::kToolCallTail);
  known_len_ = prompt_len + (r.tokens.empty() ? 0 : r.tokens.size() - 1);
  ++calls_;
  ++report_.tool_calls;
  record_ = ToolCallRecord{parsed->name, parsed->arguments.dump(), ToolStatus::ok, "", 0};  // finish_call sets status
  notify_(ToolEvent{"", record_.name, false, record_.arguments, ToolStatus::ok, 0, 0});
  call_id_ = next_request_id();
  call_start_ = Clock::now();
  const std::uint64_t id = call_id_;
  env_.tool_runner->run(*tool, std::move(parsed->arguments), env_.tool_context, agent_, id);
  deadline_(id, std::chrono::milliseconds(plan_.tool_timeout_ms), [this, alive = std::weak_ptr<int>(alive_), id] {
    if (!alive.expired()) on_timeout(id);
  });
}

void ToolLoop::on_done(ToolDone& done) {
  if (done.call_id == 0 || done.call_id != call_id_) return;  // late: the call timed out, or an earlier attempt's
  finish_call(done.ok ? ToolStatus::ok : ToolStatus::error, std::move(done.output), done.ms);
}

void ToolLoop::on_timeout(std::uint64_t call_id) {
  if (call_id != call_id_) return;
  env_.tool_runner->forget(call_id);
  finish_call(ToolStatus::timeout,
              "the tool did not answer within " + std::to_string(plan_.tool_timeout_ms) +
                  " ms (tool_timeout_ms); a result that comes later is dropped",
              ms_since(call_start_));
}

void ToolLoop::finish_call(ToolStatus status, std::string text, double ms) {
  call_id_ = 0;
  report_.tool_ms += ms;
  record_.status = status;
  record_.result = status == ToolStatus::ok ? cut_result(std::move(text)) : "error: " + cut_result(std::move(text));
  record_.ms = ms;
  report_.tool_trace.push_back(record_);
  notify_(ToolEvent{"", record_.name, true, "", status, ms, record_.result.size()});
  conv_->add_turn(reply_ids_, reply_text_, model::tool_response_text(record_.result));
  after_tool_ = true;
  round();
}

// The answer: tools withdrawn (budget spent), or constrained by the output_schema.
void ToolLoop::final_round() {
  const bool spent = calls_ >= plan_.max_tool_calls;
  SeqRequest req = base_;
  req.prompt = conv_->prompt();
  send(std::move(req), [spent](ToolLoop& l, SeqResult& r) {
    auto fail = l.fail_;
    auto then = l.then_;  // either may end this attempt, and this loop with it
    if (spent && r.json.empty() && r.text.find(model::kToolCallOpen) != std::string::npos)
      return fail("it asked for more than max_tool_calls (" + std::to_string(l.plan_.max_tool_calls) +
                     ") tool calls; raise max_tool_calls or ask for fewer calls");
    then(r);
  });
}

}  // namespace arbor::actors

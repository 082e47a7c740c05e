// The actor behind Runtime::start_generate: sends the request to the cache actor,
// forwards token pieces, completes the handle's state, quits. With tools it runs the
// steps of actors/tool_call_steps.hpp: a free request that stops at "<tool_call>"
// (skipped when the call is forced), then the call under the tools' call schema.
#include <random>

#include "actors/tool_call_steps.hpp"
#include "runtime/runtime_impl.hpp"

namespace arbor {
namespace {

using actors::SeqRequest;
using actors::SeqResult;

struct Flow {
  actors::TokenListener::pointer self;
  actors::CacheActor cache;
  SeqRequest req;  // the free request: the conversation's prompt
  std::shared_ptr<GenerationHandle::State> state;
  std::shared_ptr<const model::Model> model;
  std::optional<GenerationTools> tools;
};
using FlowPtr = std::shared_ptr<Flow>;

// "call_" and 24 letters and digits, as OpenAI writes call ids.
std::string new_call_id() {
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kChars[rng() % (sizeof(kChars) - 1)];
  return id;
}

void finish(Flow& f, const SeqResult& r, std::vector<ChatToolCall> calls = {}) {
  f.state->complete(r, std::move(calls));
  f.self->quit();
}

void send(const FlowPtr& f, SeqRequest req, std::function<void(SeqResult&)> then) {
  f->self->request(f->cache, caf::infinite, std::move(req))
      .then([then = std::move(then)](SeqResult& r) { then(r); },
            [f](caf::error& e) {
              SeqResult r;
              r.ok = false;
              r.error_code = int(ErrorCode::internal);
              r.error = "cache actor: " + f->self->system().render(e);
              finish(*f, r);
            });
}

// The call's request finished: the reply is `first`'s text (if any), then the call.
void on_call(Flow& f, const actors::CallHead& head, const std::optional<SeqResult>& first, SeqResult& call) {
  if (!call.ok) return finish(f, call);
  SeqResult out;
  if (first) {
    out = *first;
  } else {  // forced: the prompt's counts are the conversation's, without the tag
    out.request_id = call.request_id;
    out.prompt_tokens = f.req.prompt.size();
    out.cached_tokens = std::min<std::uint64_t>(call.cached_tokens, out.prompt_tokens);
    out.computed_tokens = out.prompt_tokens - out.cached_tokens;
    out.ttft_ms = call.ttft_ms;
    out.queue_ms = call.queue_ms;
  }
  out.tokens = head.ids;
  out.tokens.insert(out.tokens.end(), call.tokens.begin(), call.tokens.end());
  out.generated_tokens += call.generated_tokens;
  out.prefill_ms += call.prefill_ms;
  out.decode_ms += call.decode_ms;
  out.json.clear();
  auto parsed = call.json.empty() ? Result<model::ToolCall>(fail(ErrorCode::internal, "")) : model::parse_tool_call(call.json);
  if (!parsed) {  // cut by max_tokens (or cancelled): no call
    out.finish_reason = call.finish_reason == FinishReason::cancelled ? FinishReason::cancelled : FinishReason::length;
    return finish(f, out);
  }
  const auto close = actors::call_tail_ids(f.model->tokenizer());
  out.tokens.insert(out.tokens.end(), close.begin(), close.end());
  out.finish_reason = FinishReason::tool_calls;
  finish(f, out, {ChatToolCall{new_call_id(), parsed->name, parsed->arguments_text}});
}

// Generates the call after `head` (the reply so far, ending with "<tool_call>").
void call_step(const FlowPtr& f, actors::CallHead head, std::optional<SeqResult> first) {
  const std::int64_t budget = std::int64_t(f->req.sampling.max_tokens) - (first ? std::int64_t(first->generated_tokens) : 0);
  if (budget <= 0) {  // the tag used the last token: no room for the call
    SeqResult out = *first;
    out.finish_reason = FinishReason::length;
    return finish(*f, out);
  }
  SeqRequest call = actors::call_request(f->req, f->req.prompt, head.ids, f->tools->call_schema, int(budget));
  {
    // Under the state's lock: a cancel() either came before (no call is sent) or sees
    // the call's id, and its CancelRequest reaches the cache actor after the call.
    std::unique_lock lock(f->state->mu);
    if (!f->state->cancel_requested) {
      call.request_id = actors::next_request_id();
      f->state->request_id = call.request_id;
      send(f, std::move(call), [f, head, first](SeqResult& r) { on_call(*f, head, first, r); });
      return;
    }
  }
  SeqResult out = first.value_or(SeqResult{});
  out.finish_reason = FinishReason::cancelled;
  finish(*f, out);
}

void free_step(const FlowPtr& f) {
  SeqRequest req = f->req;
  if (f->state->on_token) req.listener = actors::TokenListener{f->self};
  if (f->tools) req.sampling.stop.emplace_back(model::kToolCallOpen);
  {
    // As in call_step: a cancel() that came before this actor ran sent its CancelRequest
    // ahead of the request, where the cache actor could not match it; so nothing is sent.
    std::unique_lock lock(f->state->mu);
    if (!f->state->cancel_requested) {
      send(f, std::move(req), [f](SeqResult& r) {
        if (f->tools && !f->tools->none)
          if (auto head = actors::find_call_head(f->model->tokenizer(), r)) return call_step(f, std::move(*head), r);
        finish(*f, r);
      });
      return;
    }
  }
  SeqResult out;
  out.request_id = req.request_id;
  out.prompt_tokens = req.prompt.size();
  out.finish_reason = FinishReason::cancelled;
  finish(*f, out);
}

}  // namespace

actors::TokenListener::behavior_type generation_actor(actors::TokenListener::pointer self, actors::CacheActor cache,
                                                      actors::SeqRequest req,
                                                      std::shared_ptr<GenerationHandle::State> state,
                                                      std::shared_ptr<const model::Model> model,
                                                      std::optional<GenerationTools> tools) {
  auto f = std::make_shared<Flow>(Flow{self, std::move(cache), std::move(req), state, std::move(model), std::move(tools)});
  if (f->tools && f->tools->forced) {
    call_step(f, actors::forced_call_head(f->model->tokenizer()), std::nullopt);
  } else {
    free_step(f);
  }
  return {
      [state](actors::TokenEvent& t) { state->on_token(t.text); },
  };
}

}  // namespace arbor

// POST /v1/chat/completions and /v1/completions, whole or streamed.
#include <ctime>

#include "runtime/server/api.hpp"

namespace arbor::server {
namespace {

// A streamed completion's output. Tokens can arrive before the stream is open (the
// backend may start decoding before start_generate returns): they wait in `early`.
struct StreamState {
  std::mutex mutex;
  bool open = false, done = false;
  std::string early;
  Utf8Joiner joiner;

  void emit(Exchange& ex, std::string frame, bool last) {
    std::lock_guard lock(mutex);
    if (!open) {
      early += frame;
      done = done || last;
      return;
    }
    ex.send(std::move(frame));
    if (last) ex.end();
  }
  void start(Exchange& ex, std::string prelude) {
    std::lock_guard lock(mutex);
    ex.begin_stream();
    ex.send(prelude + early);
    early.clear();
    open = true;
    if (done) ex.end();
  }
};

}  // namespace

void Api::completions(const HttpRequest& req, const ExchangePtr& ex, const Principal& p, bool chat) {
  const std::string route = chat ? "/v1/chat/completions" : "/v1/completions";
  auto body = parse_json(req.body);
  if (!body) return reply_error(ex, p.tenant, route, body.error());
  auto parsed = parse_completion_request(*body, chat, max_tokens_for(p.tenant));
  if (!parsed) return reply_error(ex, p.tenant, route, parsed.error());
  CompletionRequest request = std::move(*parsed);
  request.generate.tenant = p.tenant;  // from the key, never from the body
  auto admitted = admission_.admit(p.tenant, draining_);
  if (!admitted) return reply_error(ex, p.tenant, route, admitted.error());
  // Shared by on_done (which releases it first thing) and this handler; if the backend
  // drops on_done without calling it, or anything throws, the last owner releases it.
  auto slot = std::make_shared<AdmissionSlot>(std::move(*admitted));

  const std::string id = next_id(chat ? "chatcmpl-" : "cmpl-");
  const long created = static_cast<long>(std::time(nullptr));
  const std::string model = backend_.model_name();
  const std::uint64_t live_id = next_id_++;
  const std::string tenant = p.tenant;
  auto stream = request.stream ? std::make_shared<StreamState>() : nullptr;

  std::function<void(const std::string&)> on_token;
  if (stream) {
    on_token = [ex, stream, chat, id, created, model](const std::string& piece) {
      std::string text;
      {
        std::lock_guard lock(stream->mutex);
        text = stream->joiner.push(piece);
      }
      if (!text.empty()) stream->emit(*ex, sse_data(completion_chunk(chat, id, created, model, text, false, "")), false);
    };
  }
  auto on_done = [this, ex, stream, chat, id, created, model, tenant, live_id, route, slot,
                  include_usage = request.include_usage](const Result<GenerateResult>& outcome) {
    {
      std::lock_guard lock(live_mutex_);
      live_.erase(live_id);
    }
    slot->release();
    if (!outcome) {
      const ApiError e = from_error(outcome.error());
      if (!stream) return reply_error(ex, tenant, route, e);
      // Headers are out: report the error in the stream, as OpenAI does, then end it.
      return stream->emit(*ex, "data: " + error_body(e) + "\n\n" + std::string(kSseDone), true);
    }
    const GenerateResult& result = *outcome;
    metrics_.record_generation(tenant, result);
    if (!stream) {
      if (result.finish_reason == "cancelled")
        return reply_error(ex, tenant, route, unavailable("the generation was cancelled (server shutting down)"));
      return reply_json(ex, tenant, route, 200, dump(completion_response(chat, id, created, model, result)));
    }
    std::string tail;
    {
      std::lock_guard lock(stream->mutex);
      tail = stream->joiner.flush();
    }
    std::string frames;
    if (!tail.empty()) frames += sse_data(completion_chunk(chat, id, created, model, tail, false, ""));
    auto last = completion_chunk(chat, id, created, model, "", false, finish_reason(result));
    last["usage"] = usage_json(result);
    frames += sse_data(last);
    if (include_usage) {
      auto usage = completion_chunk(chat, id, created, model, "", false, "");
      usage["choices"] = nlohmann::ordered_json::array();
      usage["usage"] = usage_json(result);
      frames += sse_data(usage);
    }
    frames += kSseDone;
    stream->emit(*ex, std::move(frames), true);
  };

  {
    std::lock_guard lock(live_mutex_);
    live_[live_id] = nullptr;  // placeholder: on_done (maybe before start returns) erases it
  }
  auto forget_live = [this, live_id] {
    std::lock_guard lock(live_mutex_);
    live_.erase(live_id);
  };
  Result<std::shared_ptr<Generation>> generation = fail(ErrorCode::internal, "not started");
  try {
    generation = backend_.start_generate(request.generate, std::move(on_token), std::move(on_done));
  } catch (...) {
    forget_live();  // the slot goes with on_done; the caller answers 500
    throw;
  }
  if (!generation) {
    forget_live();
    slot->release();
    return reply_error(ex, tenant, route, from_error(generation.error()));
  }
  {
    std::lock_guard lock(live_mutex_);
    if (auto it = live_.find(live_id); it != live_.end()) it->second = *generation;
  }
  std::weak_ptr<Generation> weak = *generation;
  ex->on_abandon([weak] {
    if (auto g = weak.lock()) g->cancel();
  });
  if (stream) {
    metrics_.count_request(tenant, route, 200);
    stream->start(*ex, chat ? sse_data(completion_chunk(chat, id, created, model, "", true, "")) : "");
  }
}

}  // namespace arbor::server

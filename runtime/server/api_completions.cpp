// POST /v1/chat/completions and /v1/completions, whole or streamed.
#include <ctime>

#include "runtime/server/api.hpp"

namespace arbor::server {
namespace {

// A streamed completion's output. The stream opens (200, headers, the chat role chunk)
// with its first frame, not before: until then a failure (a prompt that can never fit,
// a full admission queue, a shutdown) is answered with its own status, exactly like a
// whole reply. Frames come from backend threads; on_done follows the last on_token.
struct StreamState {
  std::mutex mutex;
  bool open = false;
  std::string prelude;

  // Returns whether these frames opened the stream.
  bool emit(Exchange& ex, std::string frames, bool last) {
    std::lock_guard lock(mutex);
    const bool opening = !open;
    if (opening) {
      ex.begin_stream();
      frames = prelude + frames;
      open = true;
    }
    ex.send(std::move(frames));
    if (last) ex.end();
    return opening;
  }
  bool is_open() {
    std::lock_guard lock(mutex);
    return open;
  }
};

// A generation cancelled by the server (its drain deadline at shutdown): a client that
// went away has no reply to read.
ApiError cancelled_by_shutdown() {
  ApiError e = unavailable(
      "the generation was cancelled before it finished: the server is shutting down; retry on another instance");
  e.code = "server_shutting_down";
  return e;
}

}  // namespace

void Api::completions(const HttpRequest& req, const ExchangePtr& ex, const Principal& p, bool chat) {
  const std::string route = chat ? "/v1/chat/completions" : "/v1/completions";
  auto body = parse_json(req.body);
  if (!body) return reply_error(ex, p.tenant, route, body.error());
  auto parsed = parse_completion_request(*body, chat, max_tokens_for(p.tenant), req.body);
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
  if (stream && chat) stream->prelude = sse_data(completion_chunk(chat, id, created, model, "", true, ""));
  // Sends stream frames; the request counts as answered 200 when they open the stream.
  auto emit = [this, ex, stream, tenant, route](std::string frames, bool last) {
    if (stream->emit(*ex, std::move(frames), last)) metrics_.count_request(tenant, route, 200);
  };

  std::function<void(const std::string&)> on_token;
  if (stream) {
    // Each piece is valid UTF-8 (Backend's contract): it goes out as it is.
    on_token = [emit, chat, id, created, model](const std::string& piece) {
      if (!piece.empty()) emit(sse_data(completion_chunk(chat, id, created, model, piece, false, "")), false);
    };
  }
  auto on_done = [this, ex, stream, emit, chat, id, created, model, tenant, live_id, route, slot,
                  include_usage = request.include_usage](const Result<GenerateResult>& outcome) {
    {
      std::lock_guard lock(live_mutex_);
      live_.erase(live_id);
    }
    slot->release();
    const bool cancelled = outcome && outcome->finish_reason == FinishReason::cancelled;
    if (outcome) metrics_.record_generation(tenant, *outcome);
    if (!outcome || cancelled) {
      const ApiError e = outcome ? cancelled_by_shutdown() : from_error(outcome.error());
      if (!stream || !stream->is_open()) return reply_error(ex, tenant, route, e);
      // Headers are out: say in the stream why it ends, as OpenAI does, then end it.
      return emit("data: " + error_body(e) + "\n\n" + std::string(kSseDone), true);
    }
    const GenerateResult& result = *outcome;
    if (!stream) return reply_json(ex, tenant, route, 200, dump(completion_response(chat, id, created, model, result)));
    std::string frames;
    if (chat && !result.tool_calls.empty()) {  // the call, whole, in one delta before the last chunk
      auto calls = completion_chunk(chat, id, created, model, "", false, "");
      calls["choices"][0]["delta"]["tool_calls"] = tool_calls_json(result, true);
      frames += sse_data(calls);
    }
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
    emit(std::move(frames), true);
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
}

}  // namespace arbor::server

// GET /v1/kv_events: the cache's KV events as server-sent events, for schedulers
// outside Arbor (admin key only: it shows every tenant's cache activity).
//
// One `data:` line per event, kv_event_json (arbor/runtime.hpp): seq, type, tenant,
// page_size, keys, and for stored events parent and tokens. The stream starts at the
// subscription (no replay of what is cached already) and has no end of its own.
//
// Slow consumers never block the cache: an event is formatted and appended to the
// connection's unsent output on the cache's thread; when that output already holds
// more than kMaxPendingBytes (the client stopped reading), the subscription ends and
// the stream's last event is {"type": "cleared", "tenant": "", "reason": ...}: forget
// every page this stream told you about, then reconnect. The same last event ends the
// stream when the server stops.
#include <atomic>
#include <memory>

#include "runtime/server/api.hpp"

namespace arbor::server {

namespace {
constexpr std::size_t kMaxPendingBytes = 4u << 20;
}

struct Api::KvStream {
  std::shared_ptr<Exchange> ex;
  std::mutex mu;
  KvEventSubscription subscription;  // under mu
  bool ended = false;                // under mu
  std::atomic<std::uint64_t> last_sequence{0};  // set by the callback; read by end() on any thread

  // Writes the final cleared event and unsubscribes; once.
  void end(const std::string& reason) {
    KvEventSubscription gone;
    {
      std::lock_guard lock(mu);
      if (ended) return;
      ended = true;
      gone = std::move(subscription);
    }
    KvEvent cleared{.kind = KvEvent::Kind::cleared};
    cleared.sequence = last_sequence.load();
    auto j = kv_event_json(cleared);
    j["reason"] = reason;
    ex->send("data: " + j.dump() + "\n\n");
    ex->end();
    ex->on_abandon(nullptr);  // drops the closure that holds this stream (callers hold a reference)
    gone.reset();  // from inside the callback: no further call; elsewhere: waits for a running one
  }
};

void Api::kv_events(const ExchangePtr& ex, const Principal& p) {
  const std::string route = "/v1/kv_events";
  if (!p.admin)
    return reply_error(ex, p.tenant, route,
                       forbidden("GET /v1/kv_events streams every tenant's KV cache activity, so it needs the admin "
                                 "key (the server config's admin_key); this key belongs to tenant '" +
                                 p.tenant + "'"));
  if (draining_) return reply_error(ex, p.tenant, route, unavailable("the server is shutting down"));
  auto stream = std::make_shared<KvStream>();
  stream->ex = ex;
  ex->begin_stream();
  std::weak_ptr<KvStream> weak = stream;
  auto subscription = backend_.subscribe_kv_events([weak](const KvEvent& e) {
    auto s = weak.lock();
    if (!s) return;
    s->last_sequence = e.sequence;
    if (s->ex->pending_bytes() > kMaxPendingBytes)
      return s->end("this client read too slowly: more than " + std::to_string(kMaxPendingBytes) +
                    " bytes of events were waiting; forget what this stream reported and reconnect");
    s->ex->send("data: " + kv_event_json(e).dump() + "\n\n");
  });
  if (!subscription) {
    ex->send("data: " + error_body(from_error(subscription.error())) + "\n\n");
    ex->end();
    return metrics_.count_request(p.tenant, route, 200);
  }
  {
    std::lock_guard lock(stream->mu);
    if (!stream->ended) stream->subscription = std::move(*subscription);
  }
  ex->send(": arbor kv events\n\n");  // a comment: the stream is live
  ex->on_abandon([stream] {
    KvEventSubscription gone;
    {
      std::lock_guard lock(stream->mu);
      stream->ended = true;
      gone = std::move(stream->subscription);
    }
    // Unsubscribed here, outside mu: reset() waits for a running callback, which may be
    // in end() waiting for mu.
  });
  {
    std::lock_guard lock(kv_streams_mutex_);
    std::erase_if(kv_streams_, [](const auto& w) { return w.expired(); });
    kv_streams_.push_back(stream);
  }
  metrics_.count_request(p.tenant, route, 200);
}

void Api::begin_drain() {
  draining_ = true;
  std::vector<std::shared_ptr<KvStream>> streams;
  {
    std::lock_guard lock(kv_streams_mutex_);
    for (auto& w : kv_streams_)
      if (auto s = w.lock()) streams.push_back(s);
    kv_streams_.clear();
  }
  for (auto& s : streams) s->end("the server is stopping");
}

}  // namespace arbor::server

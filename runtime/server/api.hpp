// The HTTP API, independent of the transport: a request comes in with its Exchange,
// a reply (full or streamed) goes out through it. Routing, auth (API key -> tenant),
// admission (global and per-tenant caps on work in flight), the OpenAI endpoints, the
// workflow run endpoints, cache stats/tree, metrics and the dashboard.
//
// Thread safety: handle() may be called from any number of threads at once. Backend
// callbacks complete requests on backend threads through their Exchange.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/server/admission.hpp"
#include "runtime/server/api_error.hpp"
#include "runtime/server/backend.hpp"
#include "runtime/server/exchange.hpp"
#include "runtime/server/metrics.hpp"
#include "runtime/server/run_registry.hpp"
#include "runtime/server/server_config.hpp"

namespace arbor::server {

struct HttpRequest {
  std::string method;         // "GET", "POST", ...
  std::string target;         // path and query
  std::string authorization;  // the Authorization header, if any
  std::string body;
};

struct Principal {
  std::string tenant;
  bool admin = false;
};

// The dashboard page (self-contained HTML, no external resources).
const std::string& dashboard_html();

class Api {
 public:
  Api(const ServerConfig& config, Backend& backend);

  void handle(const HttpRequest& request, const std::shared_ptr<Exchange>& exchange);

  // Shutdown: refuse new work (503), then cancel what is in flight.
  // (Also ends every GET /v1/kv_events stream.)
  void begin_drain();
  void cancel_all();
  int inflight() const;

  Metrics& metrics() { return metrics_; }
  const RunRegistry& runs() const { return runs_; }
  // How to run short follow-up work off a backend callback (the server posts it to
  // its I/O pool); without one it runs inline.
  void set_defer(std::function<void(std::function<void()>)> defer) { defer_ = std::move(defer); }

 private:
  using ExchangePtr = std::shared_ptr<Exchange>;
  struct Call;
  struct Route;
  static const Route kRoutes[];  // METHOD pattern -> handler (api.cpp)

  std::optional<Principal> authenticate(const HttpRequest& request) const;
  void reply(const ExchangePtr& ex, const std::string& tenant, const std::string& route, HttpReply r);
  void reply_json(const ExchangePtr& ex, const std::string& tenant, const std::string& route, int status,
                  const std::string& body);
  void reply_error(const ExchangePtr& ex, const std::string& tenant, const std::string& route, const ApiError& e);

  void dashboard(const ExchangePtr& ex);
  void health(const ExchangePtr& ex);
  void models(const ExchangePtr& ex, const Principal& p);
  void completions(const HttpRequest& req, const ExchangePtr& ex, const Principal& p, bool chat);
  void start_run(const HttpRequest& req, const ExchangePtr& ex, const Principal& p);
  void list_runs(const ExchangePtr& ex, const Principal& p);
  void run_request(const HttpRequest& req, const ExchangePtr& ex, const Principal& p, const std::string& id,
                   bool events);
  void finish_run(const std::shared_ptr<RunEntry>& entry, const std::string& tenant);
  void cache_stats(const ExchangePtr& ex, const Principal& p);
  void cache_tree(const HttpRequest& req, const ExchangePtr& ex, const Principal& p);
  void prometheus(const ExchangePtr& ex, const Principal& p);
  void kv_events(const ExchangePtr& ex, const Principal& p);  // api_kv_events.cpp

  int max_tokens_for(const std::string& tenant) const;
  std::string next_id(const char* prefix);

  const ServerConfig config_;
  Backend& backend_;
  Metrics metrics_;
  // After config_ and metrics_, which it uses; before runs_, whose entries hold slots.
  Admission admission_{config_, metrics_};
  RunRegistry runs_;
  std::atomic<bool> draining_{false};
  std::atomic<std::uint64_t> next_id_{1};

  std::function<void(std::function<void()>)> defer_;
  std::mutex live_mutex_;
  std::unordered_map<std::uint64_t, std::shared_ptr<Generation>> live_;
  struct KvStream;  // a GET /v1/kv_events stream (api_kv_events.cpp)
  std::mutex kv_streams_mutex_;
  std::vector<std::weak_ptr<KvStream>> kv_streams_;
};

}  // namespace arbor::server

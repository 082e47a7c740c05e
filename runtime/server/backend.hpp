// What the HTTP server needs from the runtime, as an interface: the server's routing,
// auth, admission, streaming and metrics are tested against a scripted fake, and run
// in production over arbor::Runtime (make_runtime_backend).
//
// Contract: every method may be called from any thread. Callbacks (on_token, on_done,
// on_event) run on backend threads; they must be short and must not block. on_done
// is called exactly once per started generation, after its last on_token, including
// after cancel() (finish_reason "cancelled"); a generation that fails after it started
// (e.g. its prompt can never fit the pool) ends with the error. Every text handed over
// (token pieces, event texts, results) is valid UTF-8, each piece on its own: the runtime
// makes model text valid where it is decoded (model::StopChecker).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "arbor/runtime.hpp"
#include "common/result.hpp"

namespace arbor::server {

// A generation in flight.
class Generation {
 public:
  virtual ~Generation() = default;
  virtual void cancel() = 0;  // idempotent; on_done follows with "cancelled"
};

// A workflow run in flight or finished.
class RunControl {
 public:
  virtual ~RunControl() = default;
  virtual std::string id() const = 0;
  virtual bool done() const = 0;
  virtual RunResult snapshot() const = 0;  // status "running" while in flight
  // Blocks until the run ends. The server calls it only after the run's run_finished
  // event, when the end is a matter of microseconds.
  virtual RunResult wait() = 0;
  virtual void cancel() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string model_name() const = 0;
  virtual std::size_t context_length() const = 0;

  // Errors: invalid_argument / too_long (bad request), out_of_memory (admission full).
  virtual Result<std::shared_ptr<Generation>> start_generate(
      const GenerateRequest& request, std::function<void(const std::string&)> on_token,
      std::function<void(const Result<GenerateResult>&)> on_done) = 0;

  // `workflow_json` is a workflow document; `tenant` replaces its tenant field;
  // `documents` is what its prefix files may read (the server's workflow_dir policy).
  // Errors: invalid_argument with every diagnostic for an invalid workflow.
  virtual Result<std::shared_ptr<RunControl>> start_run(const std::string& workflow_json,
                                                        const std::map<std::string, std::string>& inputs,
                                                        EventCallback on_event, const std::string& tenant,
                                                        const DocumentAccess& documents) = 0;
  // The `arbor run --json` document of a run.
  virtual std::string run_json(const RunResult& result) const = 0;

  virtual CacheStats cache_stats() const = 0;
  virtual std::vector<CacheTreeNode> cache_tree(const std::string& tenant, std::size_t max_nodes) const = 0;
  // Prometheus text (HELP/TYPE lines and samples) of what only this backend knows,
  // appended to an admin's /metrics: a cluster router's nodes and routing decisions.
  // Whole-backend figures, never one tenant's. Default: nothing.
  virtual std::string metrics_text() const { return ""; }
  // A JSON array, one object per node this backend routes to (a cluster router's
  // nodes: address, up, load, pages, hit ratio, routing decisions), shown to an admin
  // as /v1/cache/stats "nodes" and by the dashboard. Default: "" (no nodes).
  virtual std::string nodes_json() const { return ""; }
  // The cache's KV events, every tenant's (Runtime::subscribe_kv_events: same thread
  // and order contract). Default: unsupported (the backend has no cache of its own).
  virtual Result<KvEventSubscription> subscribe_kv_events(std::function<void(const KvEvent&)> callback) {
    (void)callback;
    return fail(ErrorCode::unsupported, "this server's backend publishes no KV events");
  }
};

// Adapts a Runtime (which must outlive the backend). A generation's on_done comes from
// the Runtime's completion callback, on a runtime thread; no thread waits per
// generation. Destroying the backend cancels what is in flight and waits for it.
std::unique_ptr<Backend> make_runtime_backend(Runtime& runtime);

}  // namespace arbor::server

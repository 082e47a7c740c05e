// Workflow runs started over HTTP: who owns each (tenant), its event log as SSE
// frames, the clients following it, and what is kept of it once it has finished.
// Thread-safe: events arrive on runtime threads, lookups on I/O threads.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/server/admission.hpp"
#include "runtime/server/backend.hpp"
#include "runtime/server/exchange.hpp"
#include "runtime/server/openai_api.hpp"

namespace arbor::server {

// One run. While it runs: its RunControl and its event log (SSE frames), which a client
// following the run gets first. Once it has finished, the log keeps its lifecycle events
// only (no token events: the outputs are in agent_finished), and once it has settled it
// is retired to a summary: its final document; the RunControl (the plan, every agent's
// result) is let go.
class RunEntry {
 public:
  explicit RunEntry(std::string tenant) : tenant_(std::move(tenant)) {}

  const std::string& tenant() const { return tenant_; }
  void set_control(std::shared_ptr<RunControl> control);
  std::shared_ptr<RunControl> control() const;  // null once retired

  // Appends an event (as an SSE frame) and forwards it to every follower. Returns true
  // the first time a run_finished event arrives.
  bool publish(const Event& event);
  // Sends the log so far, then live events; ends the stream after run_finished. After
  // the run finished: run_started, agent_started, agent_finished, run_finished, [DONE].
  void follow(const std::shared_ptr<Exchange>& exchange);
  bool finished() const;
  // True exactly once: the caller records the run, retires it and releases its
  // admission slot.
  bool settle() { return !settled_.exchange(true); }
  // The run's admission slot: held by the entry from before the run starts until the
  // run settles (take_slot), or until the entry is dropped.
  void hold_slot(AdmissionSlot slot);
  AdmissionSlot take_slot();
  // Keeps `document` (the run's final JSON) and `status` and lets go of the RunControl.
  void retire(std::string document, RunStatus status);
  // The final document once retired, else nullopt.
  std::optional<std::string> document() const;
  std::optional<RunStatus> retired_status() const;
  // Bytes this entry holds: its log and document (what retention is bounded by).
  std::size_t retained_bytes() const;

  static constexpr std::size_t kMaxLoggedEvents = 20000;  // later token events are dropped

 private:
  struct Frame {
    bool token = false;
    std::string sse;
  };
  std::string frame(const Event& event);
  void drop_token_frames();  // under mutex_

  const std::string tenant_;
  mutable std::mutex mutex_;
  std::shared_ptr<RunControl> control_;
  std::vector<Frame> log_;
  std::size_t log_bytes_ = 0;
  std::vector<std::shared_ptr<Exchange>> followers_;
  bool finished_ = false;
  std::optional<std::string> document_;
  std::optional<RunStatus> status_;
  std::atomic<bool> settled_{false};
  AdmissionSlot slot_;
};

// The runs of a server, in start order. Finished runs are kept for GET /v1/runs/{id}
// within two limits, the oldest dropped first: at most `max_finished` of them and at
// most `max_bytes` of their retained bytes together (the newest finished run is kept
// whatever its size, so a client can read the run it just waited for).
class RunRegistry {
 public:
  RunRegistry(std::size_t max_finished, std::size_t max_bytes) : max_finished_(max_finished), max_bytes_(max_bytes) {}
  void add(const std::string& id, std::shared_ptr<RunEntry> entry);
  std::shared_ptr<RunEntry> find(const std::string& id) const;
  // Runs in start order; `tenant` empty = all.
  std::vector<std::pair<std::string, std::shared_ptr<RunEntry>>> list(const std::string& tenant) const;
  std::vector<std::shared_ptr<RunEntry>> all() const;
  // Applies the limits again (after a run retired: its size is known now).
  void trim();

  // For tests and /health: finished runs kept and their retained bytes.
  std::size_t num_finished() const;
  std::size_t finished_bytes() const;
  std::size_t size() const;

 private:
  void prune();  // under mutex_

  const std::size_t max_finished_, max_bytes_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<RunEntry>> runs_;
  std::vector<std::string> order_;
};

// The JSON of CacheStats; `only_tenant` set: that tenant's figures and the pool size only.
nlohmann::ordered_json cache_stats_json(const CacheStats& stats, const std::string* only_tenant);

}  // namespace arbor::server

// Workflow runs started over HTTP: who owns each (tenant), its event log as SSE
// frames, and the clients following it. Thread-safe: events arrive on runtime threads,
// lookups on I/O threads.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/server/admission.hpp"
#include "runtime/server/backend.hpp"
#include "runtime/server/exchange.hpp"
#include "runtime/server/openai_api.hpp"

namespace arbor::server {

class RunEntry {
 public:
  explicit RunEntry(std::string tenant) : tenant_(std::move(tenant)) {}

  const std::string& tenant() const { return tenant_; }
  void set_control(std::shared_ptr<RunControl> control);
  std::shared_ptr<RunControl> control() const;

  // Appends an event (as an SSE frame) and forwards it to every follower. Returns true
  // the first time a run_finished event arrives.
  bool publish(const Event& event);
  // Sends the log so far, then live events; ends the stream after run_finished.
  void follow(const std::shared_ptr<Exchange>& exchange);
  bool finished() const;
  // True exactly once: the caller records the run and releases its admission slot.
  bool settle() { return !settled_.exchange(true); }
  // The run's admission slot: held by the entry from before the run starts until the
  // run settles (take_slot), or until the entry is dropped.
  void hold_slot(AdmissionSlot slot);
  AdmissionSlot take_slot();

  static constexpr std::size_t kMaxLoggedEvents = 20000;  // later token events are dropped

 private:
  std::string frame(const Event& event);

  const std::string tenant_;
  mutable std::mutex mutex_;
  std::shared_ptr<RunControl> control_;
  std::vector<std::string> log_;
  std::vector<std::shared_ptr<Exchange>> followers_;
  bool finished_ = false;
  std::atomic<bool> settled_{false};
  AdmissionSlot slot_;
};

class RunRegistry {
 public:
  explicit RunRegistry(std::size_t max_finished) : max_finished_(max_finished) {}
  void add(const std::string& id, std::shared_ptr<RunEntry> entry);
  std::shared_ptr<RunEntry> find(const std::string& id) const;
  // Runs in start order; `tenant` empty = all.
  std::vector<std::pair<std::string, std::shared_ptr<RunEntry>>> list(const std::string& tenant) const;
  std::vector<std::shared_ptr<RunEntry>> all() const;

 private:
  void prune();  // drops the oldest finished runs beyond max_finished_

  const std::size_t max_finished_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<RunEntry>> runs_;
  std::vector<std::string> order_;
};

// The JSON of CacheStats; `only_tenant` set: that tenant's figures and the pool size only.
nlohmann::ordered_json cache_stats_json(const CacheStats& stats, const std::string* only_tenant);

}  // namespace arbor::server

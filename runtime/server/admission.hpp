// Admission: the server's caps on work in flight (generations and runs), global and
// per tenant, handed out as slots.
//
//   auto slot = admission.admit(tenant, draining);   // expected<AdmissionSlot, ApiError>
//   if (!slot) return reply_error(..., slot.error());
//   ... keep the slot alive while the work runs (move it into what outlives the handler) ...
//
// Invariant: every admitted slot is released exactly once, whatever the path — a
// reply, an error, an exception, or a callback dropped without being called — because
// an AdmissionSlot releases in its destructor (or earlier through release()). Slots are
// move-only, so no copy can release twice. Thread-safe.
#pragma once

#include <atomic>
#include <expected>
#include <map>
#include <mutex>
#include <string>

#include "runtime/server/api_error.hpp"
#include "runtime/server/metrics.hpp"
#include "runtime/server/server_config.hpp"

namespace arbor::server {

class Admission;

class AdmissionSlot {
 public:
  AdmissionSlot() = default;  // holds nothing
  AdmissionSlot(AdmissionSlot&& other) noexcept;
  AdmissionSlot& operator=(AdmissionSlot&& other) noexcept;
  AdmissionSlot(const AdmissionSlot&) = delete;
  AdmissionSlot& operator=(const AdmissionSlot&) = delete;
  ~AdmissionSlot() { release(); }

  // Gives the slot back now; later calls (and the destructor) do nothing. Safe to call
  // from several threads at once (one of them releases).
  void release() noexcept;
  bool held() const { return owner_.load() != nullptr; }

 private:
  friend class Admission;
  AdmissionSlot(Admission* owner, std::string tenant) : owner_(owner), tenant_(std::move(tenant)) {}

  std::atomic<Admission*> owner_{nullptr};  // null once released (or moved from)
  std::string tenant_;
};

class Admission {
 public:
  // `metrics` gets each tenant's in-flight gauge; it must outlive every slot.
  Admission(const ServerConfig& config, Metrics& metrics) : config_(config), metrics_(metrics) {}

  // A slot for one generation or run, or why not: 503 while draining or at the global
  // cap (max_inflight), 429 at the tenant's max_concurrent.
  std::expected<AdmissionSlot, ApiError> admit(const std::string& tenant, bool draining);
  int inflight() const;
  int inflight(const std::string& tenant) const;

 private:
  friend class AdmissionSlot;
  void release(const std::string& tenant) noexcept;

  const ServerConfig& config_;
  Metrics& metrics_;
  mutable std::mutex mutex_;
  int inflight_ = 0;
  std::map<std::string, int> tenant_inflight_;
};

}  // namespace arbor::server

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
//
// A slot may outlive the Admission that issued it (a run's entry is kept alive by the
// runtime's callback after the server is gone): it then releases nothing. Slots refer
// to the counts through a weak pointer, and the Admission detaches the metrics gauge
// before it goes.
#pragma once

#include <expected>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/server/api_error.hpp"
#include "runtime/server/metrics.hpp"
#include "runtime/server/server_config.hpp"

namespace arbor::server {

namespace detail {
// The counts behind an Admission, shared with its slots.
struct AdmissionLedger {
  std::mutex mutex;
  int inflight = 0;
  std::map<std::string, int> tenant_inflight;
  Metrics* metrics = nullptr;  // the in-flight gauges; null once the Admission is gone
  void release(const std::string& tenant) noexcept;
};
}  // namespace detail

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
  bool held() const;

 private:
  friend class Admission;
  AdmissionSlot(std::weak_ptr<detail::AdmissionLedger> ledger, std::string tenant)
      : ledger_(std::move(ledger)), tenant_(std::move(tenant)) {}

  mutable std::mutex mutex_;  // guards ledger_ (release may race with itself)
  std::weak_ptr<detail::AdmissionLedger> ledger_;  // empty once released (or moved from)
  std::string tenant_;
};

class Admission {
 public:
  // `metrics` gets each tenant's in-flight gauge; it must outlive the Admission.
  Admission(const ServerConfig& config, Metrics& metrics);
  ~Admission();
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  // A slot for one generation or run, or why not: 503 while draining or at the global
  // cap (max_inflight), 429 at the tenant's max_concurrent.
  std::expected<AdmissionSlot, ApiError> admit(const std::string& tenant, bool draining);
  int inflight() const;
  int inflight(const std::string& tenant) const;

 private:
  const ServerConfig& config_;
  std::shared_ptr<detail::AdmissionLedger> ledger_;
};

}  // namespace arbor::server

#include "runtime/server/admission.hpp"

namespace arbor::server {

void detail::AdmissionLedger::release(const std::string& tenant) noexcept {
  std::lock_guard lock(mutex);
  --inflight;
  if (auto it = tenant_inflight.find(tenant); it != tenant_inflight.end()) --it->second;
  if (metrics) metrics->add_inflight(tenant, -1);
}

AdmissionSlot::AdmissionSlot(AdmissionSlot&& other) noexcept {
  std::lock_guard lock(other.mutex_);
  ledger_ = std::move(other.ledger_);
  other.ledger_.reset();
  tenant_ = std::move(other.tenant_);
}

AdmissionSlot& AdmissionSlot::operator=(AdmissionSlot&& other) noexcept {
  if (this != &other) {
    release();
    std::lock_guard lock(mutex_);
    ledger_ = std::move(other.ledger_);
    other.ledger_.reset();
    tenant_ = std::move(other.tenant_);
  }
  return *this;
}

void AdmissionSlot::release() noexcept {
  std::weak_ptr<detail::AdmissionLedger> ledger;
  {
    std::lock_guard lock(mutex_);
    ledger.swap(ledger_);
  }
  if (auto l = ledger.lock()) l->release(tenant_);  // nothing if the Admission is gone
}

bool AdmissionSlot::held() const {
  std::lock_guard lock(mutex_);
  return !ledger_.expired();
}

Admission::Admission(const ServerConfig& config, Metrics& metrics)
    : config_(config), ledger_(std::make_shared<detail::AdmissionLedger>()) {
  ledger_->metrics = &metrics;
}

Admission::~Admission() {
  std::lock_guard lock(ledger_->mutex);
  ledger_->metrics = nullptr;  // a slot released later (holding the ledger) must not touch it
}

std::expected<AdmissionSlot, ApiError> Admission::admit(const std::string& tenant, bool draining) {
  if (draining) return std::unexpected(unavailable("the server is shutting down; retry on another instance"));
  auto& l = *ledger_;
  std::lock_guard lock(l.mutex);
  if (l.inflight >= config_.max_inflight)
    return std::unexpected(unavailable("the server is at capacity (" + std::to_string(config_.max_inflight) +
                                       " requests in flight); retry shortly"));
  auto limit = config_.tenant_limits.find(tenant);
  int& mine = l.tenant_inflight[tenant];
  if (limit != config_.tenant_limits.end() && limit->second.max_concurrent > 0 &&
      mine >= limit->second.max_concurrent)
    return std::unexpected(too_many_requests("tenant '" + tenant + "' has " + std::to_string(mine) +
                                             " requests in flight, its limit; retry when one finishes"));
  ++l.inflight;
  ++mine;
  l.metrics->add_inflight(tenant, 1);
  return AdmissionSlot(ledger_, tenant);
}

int Admission::inflight() const {
  std::lock_guard lock(ledger_->mutex);
  return ledger_->inflight;
}

int Admission::inflight(const std::string& tenant) const {
  std::lock_guard lock(ledger_->mutex);
  auto it = ledger_->tenant_inflight.find(tenant);
  return it == ledger_->tenant_inflight.end() ? 0 : it->second;
}

}  // namespace arbor::server

#include "runtime/server/admission.hpp"

namespace arbor::server {

AdmissionSlot::AdmissionSlot(AdmissionSlot&& other) noexcept
    : owner_(other.owner_.exchange(nullptr)), tenant_(std::move(other.tenant_)) {}

AdmissionSlot& AdmissionSlot::operator=(AdmissionSlot&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = other.owner_.exchange(nullptr);
    tenant_ = std::move(other.tenant_);
  }
  return *this;
}

void AdmissionSlot::release() noexcept {
  if (auto* owner = owner_.exchange(nullptr)) owner->release(tenant_);
}

std::expected<AdmissionSlot, ApiError> Admission::admit(const std::string& tenant, bool draining) {
  if (draining) return std::unexpected(unavailable("the server is shutting down; retry on another instance"));
  std::lock_guard lock(mutex_);
  if (inflight_ >= config_.max_inflight)
    return std::unexpected(unavailable("the server is at capacity (" + std::to_string(config_.max_inflight) +
                                       " requests in flight); retry shortly"));
  auto limit = config_.tenant_limits.find(tenant);
  int& mine = tenant_inflight_[tenant];
  if (limit != config_.tenant_limits.end() && limit->second.max_concurrent > 0 &&
      mine >= limit->second.max_concurrent)
    return std::unexpected(too_many_requests("tenant '" + tenant + "' has " + std::to_string(mine) +
                                             " requests in flight, its limit; retry when one finishes"));
  ++inflight_;
  ++mine;
  metrics_.add_inflight(tenant, 1);
  return AdmissionSlot(this, tenant);
}

void Admission::release(const std::string& tenant) noexcept {
  std::lock_guard lock(mutex_);
  --inflight_;
  if (auto it = tenant_inflight_.find(tenant); it != tenant_inflight_.end()) --it->second;
  metrics_.add_inflight(tenant, -1);
}

int Admission::inflight() const {
  std::lock_guard lock(mutex_);
  return inflight_;
}

int Admission::inflight(const std::string& tenant) const {
  std::lock_guard lock(mutex_);
  auto it = tenant_inflight_.find(tenant);
  return it == tenant_inflight_.end() ? 0 : it->second;
}

}  // namespace arbor::server

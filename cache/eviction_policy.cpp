#include "cache/eviction_policy.hpp"

namespace arbor::cache {
namespace {

class LruPolicy final : public EvictionPolicy {
 public:
  std::int64_t rank(const NodeAccess&) const override { return 0; }
  EvictionPolicyKind kind() const override { return EvictionPolicyKind::lru; }
  std::string_view name() const override { return "lru"; }
};

class LfuPolicy final : public EvictionPolicy {
 public:
  std::int64_t rank(const NodeAccess& access) const override {
    return std::int64_t(access.hit_count);
  }
  EvictionPolicyKind kind() const override { return EvictionPolicyKind::lfu; }
  std::string_view name() const override { return "lfu"; }
};

class PriorityPolicy final : public EvictionPolicy {
 public:
  std::int64_t rank(const NodeAccess& access) const override { return access.priority; }
  EvictionPolicyKind kind() const override { return EvictionPolicyKind::priority; }
  std::string_view name() const override { return "priority"; }
};

}  // namespace

std::unique_ptr<EvictionPolicy> make_eviction_policy(EvictionPolicyKind kind) {
  switch (kind) {
    case EvictionPolicyKind::lfu: return std::make_unique<LfuPolicy>();
    case EvictionPolicyKind::priority: return std::make_unique<PriorityPolicy>();
    case EvictionPolicyKind::lru: break;
  }
  return std::make_unique<LruPolicy>();
}

}  // namespace arbor::cache

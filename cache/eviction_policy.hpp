// Which unlocked leaf of the radix tree to evict next (KV rules 11, 17).
//
// A policy maps a node's access statistics to a rank; the evictable leaf with the
// lowest (rank, last_access, tree, node) goes first. `last_access` is a logical clock
// (bumped by every match and insert), so every order is deterministic and ties always
// fall back to LRU.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

namespace arbor::cache {

enum class EvictionPolicyKind { lru, lfu, priority };

// What a policy may look at. Updated by the tree on match (hit_count, last_access),
// insert (last_access) and set_priority.
struct NodeAccess {
  std::uint64_t last_access = 0;  // logical clock value of the last match/insert
  std::uint64_t hit_count = 0;    // matches whose path went through this node
  int priority = 0;               // caller-supplied; higher survives longer
};

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;
  // Lower ranks are evicted first; equal ranks go by least recent access.
  virtual std::int64_t rank(const NodeAccess& access) const = 0;
  virtual EvictionPolicyKind kind() const = 0;
  virtual std::string_view name() const = 0;
};

// LRU: rank 0 for every node. LFU: rank = hit_count. Priority: rank = priority.
std::unique_ptr<EvictionPolicy> make_eviction_policy(EvictionPolicyKind kind);

// A monotonic logical clock shared by every tree of one cache, so LRU order holds
// across namespaces.
struct LogicalClock {
  std::uint64_t now = 0;
  std::uint64_t tick() { return ++now; }
};

}  // namespace arbor::cache

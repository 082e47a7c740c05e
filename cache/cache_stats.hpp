// Plain counters the cache keeps for dashboards, events and tests; copying one is cheap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cache/kv_geometry.hpp"
#include "common/cache_stats.hpp"

namespace arbor::cache {

using TenantId = std::int32_t;
constexpr TenantId kSharedNamespace = -1;  // the namespace published prefixes live in

// TokenCounters (common/cache_stats.hpp): lookups = match() calls, hit/miss_tokens =
// what match() adopted / left to compute, inserted_tokens = added by commit().

// The public TenantCacheStats (its counters; used_pages = tree_pages + private_pages,
// what the quota limits) plus what only the cache's own users read.
struct TenantStats : TenantCacheStats {
  std::string name;
  std::size_t tree_pages = 0;       // pages in the tenant's own tree
  std::size_t private_pages = 0;    // pages of its live sequences not (yet) in a tree
  std::size_t evictable_pages = 0;  // own tree pages no lock holds
};

struct PoolStats {
  int total_pages = 0;
  int free_pages = 0;
  int used_pages = 0;
  int idle_pages = 0;       // cached and unlocked: held only by unlocked tree nodes
  int protected_pages = 0;  // held by a live sequence, a pin or a locked tree path
};

// PrefixCache::stats(): the pool's and the trees' raw counters. Not the public
// CacheStats (common/cache_stats.hpp), which BatchEngine::snapshot fills from these plus
// the scheduler's token figures.
struct PrefixCacheStats {
  TokenCounters total;          // every tenant plus the shared namespace's evictions
  PoolStats pool;
  std::size_t shared_tree_pages = 0;
  std::size_t pinned_pages = 0;  // counted per pin (overlapping pins count twice)
  int num_sequences = 0;
  int num_pins = 0;
};

// What the eviction listener hears, once per evicted page.
struct EvictionEvent {
  TenantId tenant = kSharedNamespace;  // whose namespace (kSharedNamespace: the shared one)
  PageId page = kNoPage;
  std::size_t end_token = 0;  // the page held tokens [end_token - page_size, end_token)
  bool freed = false;         // true when no other holder kept the page alive
};

}  // namespace arbor::cache

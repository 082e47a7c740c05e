// The KV cache's statistics and tree nodes, defined once for every layer: the cache keeps the
// counters (cache::PrefixCache), the scheduler adds its token figures (TokenUsage) and sends them
// (actors::CacheSnapshot; CAF inspect in actors/messages.hpp), and the embedding API,
// the CLI and the server return them (Runtime::cache_stats, to_json). The JSON names are
// the member names; a new counter is a member here plus its name in the lists below and
// in the inspect.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/token_usage.hpp"

namespace arbor {

// What one namespace's tree has seen (cache::PrefixCache counts them).
struct TokenCounters {
  std::uint64_t lookups = 0;          // prompts matched against the tree
  std::uint64_t hit_tokens = 0;       // tokens adopted from the cache
  std::uint64_t miss_tokens = 0;      // prompt tokens left to compute
  std::uint64_t inserted_tokens = 0;  // tokens newly added to the tree
  std::uint64_t evicted_pages = 0;    // pages evicted from the namespace's tree
};

// One tenant's share of the cache.
struct TenantCacheStats : TokenCounters {
  std::size_t used_pages = 0;   // its tree's pages plus its live sequences' private ones
  std::size_t quota_pages = 0;  // 0 = no quota
  int num_sequences = 0;
};

// The whole cache at one instant. The TokenUsage sums every request served that
// generates; prefill-only requests (cache warm-ups) count only in warmup_tokens.
struct CacheStats : TokenUsage {
  std::uint64_t warmup_tokens = 0;    // prefilled by cache warm-ups (AgentResult::warmup_tokens)
  double hit_ratio = 0;               // hit_ratio(usage()): cached / prompt
  int pages_total = 0, pages_used = 0, pages_free = 0;
  int pages_locked = 0;               // held by a live sequence, a pin or a locked tree path
  int pages_cached_idle = 0;          // cached and unlocked: evictable
  // Pins: prefixes kept for pending agents and agents' histories kept while a tool runs
  // (tool_pin_ttl_ms). pages_pinned sums over pins (two pins of one prefix count twice);
  // pinned pages are among pages_locked.
  int pages_pinned = 0;
  int pins = 0;
  std::uint64_t evictions = 0;        // pages evicted, every namespace
  int live_sequences = 0;
  int queued_requests = 0;
  // The scheduler's batched steps and their wall time (with the steps that only collect
  // the last one in flight); forward_seconds is the part inside
  // the engine's forward, the rest host work (admission, radix matching, page
  // reservation, sampling) that the device waits on: what overlapping steps would hide.
  std::uint64_t batched_steps = 0;
  double step_seconds = 0, forward_seconds = 0;
  double host_seconds() const { return step_seconds - forward_seconds; }
  // Of those steps, the ones a device engine ran as graphs: replayed as captured before
  // (one launch call on the host), or captured (model::GraphCounts).
  std::uint64_t graph_steps_replayed = 0, graph_steps_captured = 0;
  std::map<std::string, TenantCacheStats> tenants;
};

// One node of a namespace's radix tree, as a dashboard shows it: the cache fills it
// (cache::PrefixCache::tree_summary), the cache actor sends it (actors::TreeReply; CAF
// inspect in actors/messages.hpp) and Runtime::cache_tree decodes its snippet. Ids are
// unique within a namespace and stable while the node lives; parent_id 0 is the
// namespace's root.
struct CacheTreeNode {
  std::uint64_t id = 0, parent_id = 0;
  std::size_t num_tokens = 0;    // tokens on the edge into this node
  std::size_t depth_tokens = 0;  // tokens from the root to the end of the edge
  std::uint64_t hit_count = 0;   // matches whose path went through this node
  int lock_count = 0;
  bool shared_namespace = false;  // the node is in the shared namespace (published prefixes)
  std::string snippet = {};       // first_tokens decoded, valid UTF-8 (set by Runtime::cache_tree)
  std::vector<std::int32_t> first_tokens = {};  // the edge's first few token ids
  std::string node = {};  // on a cluster router: the node whose cache holds it ("HOST:PORT"); "" in one process
};

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CacheTreeNode, id, parent_id, num_tokens, depth_tokens, hit_count, lock_count,
                                   shared_namespace, snippet, first_tokens, node)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(TenantCacheStats, lookups, hit_tokens, miss_tokens, inserted_tokens,
                                   evicted_pages, used_pages, quota_pages, num_sequences)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CacheStats, prompt_tokens, cached_tokens, computed_tokens, generated_tokens,
                                   warmup_tokens, hit_ratio, pages_total, pages_used, pages_free, pages_locked,
                                   pages_cached_idle, pages_pinned, pins, evictions, live_sequences, queued_requests,
                                   batched_steps, step_seconds, forward_seconds, graph_steps_replayed,
                                   graph_steps_captured, tenants)

}  // namespace arbor

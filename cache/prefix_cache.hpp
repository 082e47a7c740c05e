// PrefixCache: the shared-prefix KV cache the cache actor drives (KV rules 1-11).
// Paged pool + one radix tree per namespace (model id, tenant) + a shared namespace
// for published prefixes + eviction + quotas + pins + stats.
//
// THREADING: single-threaded by contract. Exactly one owner (the cache actor) calls
// it; nothing inside is synchronized. Concurrency comes from batching sequences.
//
// Sequence lifecycle (what the scheduler does per request):
//   open_sequence(tenant) -> SeqId
//   match(seq, prompt, prompt.size() - 1) -> n cached tokens adopted; page_table(seq)
//       now starts with the cached (read-only) pages; compute positions n..
//   reserve(seq, prompt.size() [+ decode budget]) -> page table covers that many tokens
//   ... write K/V for positions >= writable_from(seq), then
//   commit(seq, all tokens computed so far) -> full pages enter the tree; others can
//       match them immediately; the partial tail page stays private
//   (decode: reserve one token more, write, commit when a page fills or at the end)
//   close(seq) -> locks released, private pages freed, cached pages stay until evicted
//
// Page invariants: a page in a tree is read-only; page_table(seq)[i] for
// i >= num_shared_pages is private to that one sequence, so two sequences never write
// the same physical page (KV rule 10). Only unlocked leaves are evicted (rule 11); a
// live sequence's matched/committed path and pinned paths are locked.
//
// Quotas count a tenant's own tree pages plus its sequences' private pages. Pages of
// the shared namespace are charged to nobody; a shared page a tenant commits into its
// own tree (by extending a published prefix) is charged to it from then on, which can
// leave it over quota until its next reserve evicts its own pages.
//
// Errors are values: unknown ids -> not_found, misuse -> invalid_argument, no room ->
// out_of_memory (state unchanged). Complexities are per call; L = tokens passed,
// d = tree nodes on the path, T = tenants, k = pages allocated or evicted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/cache_stats.hpp"
#include "cache/eviction_policy.hpp"
#include "cache/kv_geometry.hpp"
#include "cache/page_allocator.hpp"
#include "cache/page_key.hpp"
#include "cache/page_pool.hpp"
#include "cache/radix_tree.hpp"
#include "common/kv_event.hpp"
#include "common/result.hpp"

namespace arbor::cache {

using SeqId = std::uint64_t;
using PinId = std::uint64_t;

struct PrefixCacheConfig {
  int num_pages = 0;
  EvictionPolicyKind eviction = EvictionPolicyKind::lru;
  int max_pinned_pages = 0;  // cap on pages held by pins; 0 = half the pool
  std::string model_id;      // part of every namespace key (rule 4)
};

struct TenantConfig {
  std::size_t quota_pages = 0;  // 0 = no quota (the pool is the limit)
  bool read_shared = false;     // may match prefixes published to the shared namespace
};

struct SequenceInfo {
  TenantId tenant = 0;
  std::size_t num_tokens = 0;        // tokens matched or committed so far
  std::size_t num_shared_pages = 0;  // leading read-only pages (in a tree)
  std::size_t num_pages = 0;         // page table length
  // First position the sequence may write: positions below it live in shared pages.
  std::size_t writable_from = 0;
};

class PrefixCache {
 public:
  // Precondition: validate(geometry, config) succeeds. If the allocator cannot provide
  // the pages, the pool is empty and every reserve fails with the allocator's message.
  PrefixCache(KvGeometry geometry, PrefixCacheConfig config, PageAllocator& allocator);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  static Result<void> validate(const KvGeometry& geometry, const PrefixCacheConfig& config);

  // --- tenants: O(1) (add_tenant: O(T) name check) ---
  Result<TenantId> add_tenant(std::string name, TenantConfig config = {});
  Result<TenantId> find_tenant(std::string_view name) const;

  // --- sequences ---
  Result<SeqId> open_sequence(TenantId tenant);  // O(1)
  // Adopts the longest cached page-aligned prefix of tokens[0, max_match_tokens) from
  // the tenant's tree (or the shared one, if read_shared and longer); locks it and makes
  // its pages the head of the page table. Only on a sequence with an empty page table.
  // O(L + d). Returns the number of tokens adopted.
  Result<std::size_t> match(SeqId seq, std::span<const TokenId> tokens,
                            std::size_t max_match_tokens);
  // Grows the page table to cover total_tokens (never shrinks), evicting unlocked
  // leaves if needed: the tenant's own first when over quota, then globally in policy
  // order. out_of_memory, with nothing changed, when it cannot. O(k + T * leaves evicted).
  Result<void> reserve(SeqId seq, std::size_t total_tokens);
  // `tokens` = every token whose K/V the sequence has computed (must extend what it
  // matched or committed, and fit its page table). Inserts the full pages into the
  // tenant's tree; where the tree already holds a page for a position, the sequence
  // switches to the tree's page and its own copy is freed. Locks the new path, releases
  // the old. O(L + d).
  Result<void> commit(SeqId seq, std::span<const TokenId> tokens);
  Result<void> close(SeqId seq);  // O(pages + d)
  // Logical page -> physical page; empty for an unknown id. Valid until the next
  // reserve/commit/close of that sequence.
  std::span<const PageId> page_table(SeqId seq) const;
  Result<SequenceInfo> sequence_info(SeqId seq) const;

  // --- workflow-aware retention ---
  // Locks the cached path of `tokens` (own tree, or shared if longer and readable)
  // until unpin. not_found if nothing is cached; out_of_memory over max_pinned_pages.
  Result<PinId> pin(TenantId tenant, std::span<const TokenId> tokens);
  Result<void> unpin(PinId pin);
  // Priority (priority policy; higher is kept longer) for the nodes of the tenant's own
  // cached path of `tokens`; returns how many tokens that path covers.
  Result<std::size_t> set_priority(TenantId tenant, std::span<const TokenId> tokens, int priority);
  // Copies the tenant's cached path of `tokens` into the shared namespace (same
  // physical pages, read-only, refcounted); returns the tokens published.
  Result<std::size_t> publish(TenantId tenant, std::span<const TokenId> tokens);

  // Evicts unlocked leaves (policy order across all namespaces) until `num_pages` pool
  // pages are freed or nothing is evictable; returns the pages freed. evict(0) is a no-op.
  std::size_t evict(std::size_t num_pages);
  void set_eviction_listener(std::function<void(const EvictionEvent&)> listener);
  // KV events (common/kv_event.hpp), called synchronously inside the call that causes
  // them, in order: commit and publish -> one `stored` event with the pages new to the
  // namespace's tree (none when every page was cached already); eviction -> one
  // `removed` event per namespace and eviction pass, keys in eviction order (a page is
  // removed only after every page below it). Keys: cache/page_key.hpp, seeded with the
  // tenant's name ("" for the shared namespace). `sequence` is left 0 (the runtime
  // numbers events). The listener must not call back into this cache.
  void set_kv_event_listener(std::function<void(const KvEvent&)> listener);

  // --- observation (cheap) ---
  PrefixCacheStats stats() const;                           // O(T)
  Result<TenantStats> tenant_stats(TenantId tenant) const;  // O(1)
  // Breadth-first, own namespace then (if read_shared) the shared one; at most max_nodes.
  Result<std::vector<CacheTreeNode>> tree_summary(TenantId tenant, std::size_t max_nodes) const;
  // Full audit; "" when every invariant holds, else the first violation. O(everything).
  std::string check_invariants() const;

  const KvGeometry& geometry() const { return pool_.geometry(); }
  PagePool& pool() { return pool_; }
  const PagePool& pool() const { return pool_; }

 private:
  struct Tenant {
    std::string name;
    TenantConfig config;
    std::unique_ptr<RadixTree> tree;
    TokenCounters counters;
    std::size_t private_pages = 0;  // sum over its sequences of unshared pages
    int num_sequences = 0;
    std::unordered_map<PageId, PageKey> keys;  // page key of every page of its tree
  };
  struct Sequence {
    TenantId tenant = 0;
    TenantId locked_ns = 0;            // namespace whose tree holds `node`
    NodeId node = kRootNode;           // locked path end (root: nothing locked)
    std::vector<PageId> pages;         // page table; each entry holds a ref + protect
    std::size_t num_shared_pages = 0;  // pages[0, n) are the locked path's pages
    std::vector<TokenId> tokens;       // tokens of those shared pages
    std::size_t num_tokens = 0;
  };
  struct Pin {
    TenantId ns = 0;
    NodeId node = kRootNode;
    std::size_t num_pages = 0;
  };

  Tenant* tenant_ptr(TenantId id);
  const Tenant* tenant_ptr(TenantId id) const;
  RadixTree& tree(TenantId ns);
  const RadixTree& tree(TenantId ns) const;
  Result<Sequence*> sequence_ptr(SeqId seq, const char* op);
  // The longer of the tenant's own and (if readable) the shared match; own on ties.
  struct Choice {
    TenantId ns = 0;
    MatchResult match;
  };
  Choice best_match(TenantId tenant, std::span<const TokenId> tokens);
  Result<void> make_room(TenantId tenant, std::size_t num_pages);
  std::size_t evict_from(TenantId ns, std::size_t num_pages);
  std::string check_holders() const;
  // Keys the pages of `r` new to namespace `ns` (the tail of r.pages), emits `stored`.
  void note_stored(TenantId ns, std::span<const TokenId> tokens, const InsertResult& r);
  std::unordered_map<PageId, PageKey>& keys_of(TenantId ns);
  const std::string& ns_name(TenantId ns) const;

  PagePool pool_;  // declared first: destroyed after the trees that hold its pages
  std::unique_ptr<EvictionPolicy> policy_;
  LogicalClock clock_;
  PrefixCacheConfig config_;
  std::vector<std::unique_ptr<Tenant>> tenants_;
  std::unique_ptr<RadixTree> shared_tree_;
  TokenCounters total_;
  std::unordered_map<SeqId, Sequence> sequences_;
  std::unordered_map<PinId, Pin> pins_;
  SeqId next_seq_ = 1;
  PinId next_pin_ = 1;
  std::size_t pinned_pages_ = 0;
  std::function<void(const EvictionEvent&)> listener_;
  std::function<void(const KvEvent&)> kv_listener_;
  std::unordered_map<PageId, PageKey> shared_keys_;  // page key of every page of the shared tree
};

}  // namespace arbor::cache

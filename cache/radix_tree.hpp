// Radix tree over token ids for one cache namespace (model, tenant): the prefix index
// behind SGLang-style prefix caching (KV rules 1, 4, 11).
//
// Single-threaded by contract: the one cache owner calls it; no locks inside.
//
// Edges are page-granular: every edge holds a whole number of pages (its token count
// is a multiple of page_size) and the tree never holds a partial page. Node `n`'s
// edge covers tokens [start, start + edge length) of every sequence through it, and
// `pages[i]` holds the K/V of that edge's i-th page. Siblings never share their first
// page (they would have been one edge), so a child is found by hashing its first page.
//
// Page ownership: the tree holds one pool reference per page it contains, taken on
// insert and dropped on evict. Locks: lock(node) bumps lock_count on node and every
// ancestor; a node with lock_count > 0 is protected (its pages are pool-protected and
// never evicted), one with 0 is evictable. Because locks cover whole root paths, an
// unlocked node has only unlocked descendants, so evictable_pages() can all be freed
// by repeatedly evicting unlocked leaves. Only unlocked leaves are ever evicted, and
// a leaf is evicted tail page first; when a leaf empties its parent may become an
// evictable leaf (a shared prefix outlives its suffixes).
//
// Complexity (L = tokens asked, d = nodes on the path, E = evictable leaves):
//   match_prefix, set_priority, find: O(L) token compares + O(d) hash lookups (+1 split)
//   insert: the same + O(new pages) refs + O(log E)
//   lock/unlock: O(d log E) + O(pages of nodes whose lock state flips)
//   evict(k): O(k + leaves removed * log E)
//   next_victim: O(1)
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/eviction_policy.hpp"
#include "cache/kv_geometry.hpp"
#include "cache/page_pool.hpp"

namespace arbor::cache {

using NodeId = std::int32_t;
constexpr NodeId kNoNode = -1;
constexpr NodeId kRootNode = 0;

struct RadixNode {
  NodeId parent = kNoNode;
  std::size_t start = 0;         // tokens before this edge (depth of the parent's end)
  std::vector<TokenId> tokens;   // edge label, a multiple of page_size tokens
  std::vector<PageId> pages;     // tokens.size() / page_size pages
  std::unordered_map<std::uint64_t, NodeId> children;  // first-page hash -> child
  NodeId next_same_key = kNoNode;  // next sibling whose first page hashes the same
  std::uint64_t key = 0;           // hash of this edge's first page
  int lock_count = 0;
  NodeAccess access;
  std::uint64_t serial = 0;  // unique for the tree's lifetime (dashboard ids)
  bool live = false;

  std::size_t end() const { return start + tokens.size(); }
  bool is_leaf() const { return children.empty(); }
};

struct MatchResult {
  std::size_t num_tokens = 0;  // matched, a multiple of page_size
  std::vector<PageId> pages;   // num_tokens / page_size pages, root first
  NodeId node = kRootNode;     // the node whose edge ends exactly at num_tokens
};

struct InsertResult {
  NodeId node = kRootNode;            // the node ending at the inserted length
  std::vector<PageId> pages;          // the tree's page for each inserted page position
  std::vector<std::size_t> duplicates;  // positions where the tree kept its own page
                                        // (pages[i] != caller's pages[i]): caller drops its copy
  std::size_t num_new_pages = 0;      // pages the tree took from the caller
};

struct EvictedPage {
  PageId page = kNoPage;
  std::size_t end_token = 0;  // the page covered tokens [end_token - page_size, end_token)
};

// Evictable leaves sort by this key; the smallest goes first.
struct EvictionKey {
  std::int64_t rank = 0;
  std::uint64_t last_access = 0;
  NodeId node = kNoNode;
  auto operator<=>(const EvictionKey&) const = default;
};

struct EvictionCandidate {
  EvictionKey key;
  std::size_t num_pages = 0;  // pages on the candidate leaf's edge
};

class RadixTree {
 public:
  // pool, policy and clock must outlive the tree.
  RadixTree(int page_size, PagePool& pool, const EvictionPolicy& policy, LogicalClock& clock);
  ~RadixTree();
  RadixTree(const RadixTree&) = delete;
  RadixTree& operator=(const RadixTree&) = delete;

  enum class Touch { hit, none };
  // Longest cached page-aligned prefix of `tokens`. Splits the node where the match
  // ends mid-edge (content unchanged) so that `node` ends exactly at the match.
  // Touch::hit bumps the logical clock and the hit counts along the path.
  MatchResult match_prefix(std::span<const TokenId> tokens, Touch touch = Touch::hit);
  // Counts a hit on `node` and its ancestors and makes them the most recently used
  // (what Touch::hit does; for callers that choose between several matches first).
  void record_hit(NodeId node);

  // Inserts the full pages of `tokens` (a trailing partial page is ignored), page i of
  // the prefix held by pages[i]. Where the tree already has a page for a position it
  // keeps its own and reports the position in `duplicates`. Requires
  // pages.size() >= tokens.size() / page_size. New pages get a tree reference.
  InsertResult insert(std::span<const TokenId> tokens, std::span<const PageId> pages);

  void lock(NodeId node);
  void unlock(NodeId node);

  // Sets `priority` on every node of the cached path of `tokens` (split at its end);
  // returns the number of tokens that path covers. Nodes inserted later get 0.
  std::size_t set_priority(std::span<const TokenId> tokens, int priority);

  // Evicts up to `num_pages` pages from unlocked leaves in policy order, each leaf
  // tail page first; returns them in eviction order. evict(0) does nothing.
  std::vector<EvictedPage> evict(std::size_t num_pages);
  std::optional<EvictionCandidate> next_victim() const;

  std::size_t num_pages() const { return num_pages_; }
  std::size_t evictable_pages() const { return evictable_pages_; }
  std::size_t protected_pages() const { return protected_pages_; }
  std::size_t num_nodes() const { return nodes_.size() - free_nodes_.size(); }
  int page_size() const { return page_size_; }

  const RadixNode& node(NodeId id) const { return nodes_[std::size_t(id)]; }
  bool is_live(NodeId id) const {
    return id >= 0 && std::size_t(id) < nodes_.size() && nodes_[std::size_t(id)].live;
  }
  // Pages from the root to the end of `id`'s edge.
  std::vector<PageId> path_pages(NodeId id) const;
  // Children of `id`, oldest first (deterministic for dashboards and tests).
  std::vector<NodeId> children(NodeId id) const;
  // Calls f(node_id) for every live node except the root.
  template <class F>
  void for_each_node(F&& f) const {
    for (std::size_t i = 1; i < nodes_.size(); ++i)
      if (nodes_[i].live) f(NodeId(i));
  }

  // Structure, counters and the evictable set; "" when they hold, else the first
  // violation. (Page refcounts are checked by the owner, which knows every holder.)
  std::string check_invariants() const;

 private:
  struct Walk {
    NodeId node = kRootNode;
    std::size_t num_pages = 0;
  };
  // Follows `tokens` page by page, appending matched pages to `pages` when given;
  // splits the node where the path ends mid-edge so Walk::node ends exactly there.
  Walk walk(std::span<const TokenId> tokens, std::vector<PageId>* pages);
  NodeId find_child(NodeId parent, std::span<const TokenId> first_page) const;
  void add_child(NodeId parent, NodeId child);
  void remove_child(NodeId parent, NodeId child);
  NodeId split(NodeId node, std::size_t num_pages);  // returns the new upper node
  NodeId new_node();
  void free_node(NodeId id);
  std::uint64_t page_hash(std::span<const TokenId> page) const;
  EvictionKey key_of(NodeId id) const;
  void refresh_evictable(NodeId id);  // (re)files id in evictable_ by its current state
  void drop_evictable(NodeId id);

  int page_size_;
  PagePool& pool_;
  const EvictionPolicy& policy_;
  LogicalClock& clock_;
  std::vector<RadixNode> nodes_;
  std::vector<NodeId> free_nodes_;
  std::set<EvictionKey> evictable_;              // unlocked leaves, never the root
  std::vector<std::optional<EvictionKey>> filed_;  // per node: its key in evictable_
  std::uint64_t next_serial_ = 1;
  std::size_t num_pages_ = 0;
  std::size_t evictable_pages_ = 0;
  std::size_t protected_pages_ = 0;
};

}  // namespace arbor::cache

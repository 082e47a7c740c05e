// Cache-aware routing for `arbor serve --nodes`: which node a request goes to.
//
// PrefixIndex: the router's picture of one node's KV cache, per tenant, as chains of
// page keys (cache/page_key.hpp: page i's key hashes the tenant and every token of
// pages 0..i, so a key stands for a whole prefix, as a radix tree's path does; the
// node's cache names its pages with the same function). It is fed by what the router
// itself sends to the node (every full page of each routed prompt, at once) and by the
// node's KV events (pages it committed and evicted, common/kv_event.hpp, arriving a
// little later), and bounded by `capacity_pages` (the router: twice the node's pool,
// cluster_backend.cpp's index_capacity): past it the least recently used keys go, deepest pages of a chain first (a chain is touched leaf to
// root, so its root is the newest). It is approximate between events: the node may
// have evicted what the index still lists until the removal arrives. Keys never match
// across tenants (the tenant seeds the chain), so a tenant is never routed by another
// tenant's prefixes.
//
// choose_node, the rule (Preble-style: reuse unless it costs balance):
//   1. best = the up node with the longest matched prefix (ties: fewer in flight, then
//      lower index); least = the up node with the fewest requests in flight (ties:
//      fewer indexed pages, i.e. the emptiest cache, then lower index).
//   2. No node matches a single page ("cold") -> the emptiest cache (fewest indexed
//      pages; ties: fewer in flight, then lower index) among the up nodes with at most
//      `overload_margin` requests in flight beyond least: a new prefix goes where there
//      is most room, so the cluster holds every document once and none evicts
//      another's; the margin bounds the queueing, as in rule 3.
//   3. best has more than `overload_margin` requests in flight beyond least -> least
//      ("balance"): queueing behind a busy node costs more than recomputing the prefix.
//   4. Otherwise best ("prefix").
// Not thread-safe: the caller (ClusterBackend) holds its lock.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace arbor::cluster {

class PrefixIndex {
 public:
  PrefixIndex(std::size_t page_size, std::size_t capacity_pages);

  // Tokens of `ids` whose pages the index lists for `tenant` (a multiple of the page
  // size), reading from the first page on. O(pages of ids).
  std::size_t match(const std::string& tenant, std::span<const std::int32_t> ids) const;
  // Lists every full page of `ids` for `tenant` as just used, then evicts past the
  // capacity. O(pages of ids * log(size)).
  void insert(const std::string& tenant, std::span<const std::int32_t> ids);
  // A KV event's keys: `keys` (a chain, root first) listed as just used, as insert;
  // remove drops each listed key (absent ones are ignored). O(keys * log(size)).
  void insert_keys(std::span<const std::uint64_t> keys);
  void remove_keys(std::span<const std::uint64_t> keys);
  void clear();  // the node lost its cache (it went down, or a cleared event)
  std::size_t num_pages() const { return last_use_.size(); }
  std::size_t page_size() const { return page_size_; }

 private:
  std::size_t page_size_;
  std::size_t capacity_pages_;
  std::uint64_t clock_ = 0;
  std::unordered_map<std::uint64_t, std::uint64_t> last_use_;  // key -> stamp
  std::map<std::uint64_t, std::uint64_t> by_stamp_;            // stamp -> key (stamps are unique)
};

// One node as choose_node sees it.
struct NodeLoad {
  bool up = true;
  std::size_t inflight = 0;        // requests the router has in flight there
  std::size_t matched_tokens = 0;  // PrefixIndex::match for this request
  std::size_t indexed_pages = 0;   // PrefixIndex::num_pages
};

enum class RouteKind { prefix, balance, cold };
inline constexpr std::array<RouteKind, 3> kRouteKinds = {RouteKind::prefix, RouteKind::balance, RouteKind::cold};
const char* to_string(RouteKind kind);

// A count per RouteKind (requests or runs a node was sent, by decision).
struct RouteCounts {
  std::array<std::uint64_t, kRouteKinds.size()> by_kind{};
  std::uint64_t& operator[](RouteKind kind) { return by_kind[static_cast<std::size_t>(kind)]; }
  std::uint64_t operator[](RouteKind kind) const { return by_kind[static_cast<std::size_t>(kind)]; }
};

struct RouteChoice {
  std::size_t node = 0;
  RouteKind kind = RouteKind::cold;
  std::size_t matched_tokens = 0;  // the chosen node's
};

// The rule above; nullopt when no node is up.
std::optional<RouteChoice> choose_node(std::span<const NodeLoad> nodes, std::size_t overload_margin);

}  // namespace arbor::cluster

#include "runtime/cluster/route_policy.hpp"

#include <algorithm>

#include "cache/page_key.hpp"

namespace arbor::cluster {

PrefixIndex::PrefixIndex(std::size_t page_size, std::size_t capacity_pages)
    : page_size_(std::max<std::size_t>(page_size, 1)), capacity_pages_(std::max<std::size_t>(capacity_pages, 1)) {}

std::size_t PrefixIndex::match(const std::string& tenant, std::span<const std::int32_t> ids) const {
  std::size_t pages = 0;
  for (auto key : cache::page_keys(tenant, ids, page_size_)) {
    if (!last_use_.contains(key)) break;
    ++pages;
  }
  return pages * page_size_;
}

void PrefixIndex::insert(const std::string& tenant, std::span<const std::int32_t> ids) {
  const auto keys = cache::page_keys(tenant, ids, page_size_);
  insert_keys(keys);
}

void PrefixIndex::remove_keys(std::span<const std::uint64_t> keys) {
  for (auto key : keys) {
    auto it = last_use_.find(key);
    if (it == last_use_.end()) continue;
    by_stamp_.erase(it->second);
    last_use_.erase(it);
  }
}

void PrefixIndex::insert_keys(std::span<const std::uint64_t> keys) {
  for (auto it = keys.rbegin(); it != keys.rend(); ++it) {  // leaf first: the root ends newest
    const std::uint64_t stamp = ++clock_;
    auto [at, added] = last_use_.try_emplace(*it, stamp);
    if (!added) {
      by_stamp_.erase(at->second);
      at->second = stamp;
    }
    by_stamp_.emplace(stamp, *it);
  }
  while (last_use_.size() > capacity_pages_) {
    auto oldest = by_stamp_.begin();
    last_use_.erase(oldest->second);
    by_stamp_.erase(oldest);
  }
}

void PrefixIndex::clear() {
  last_use_.clear();
  by_stamp_.clear();
}

const char* to_string(RouteKind kind) {
  switch (kind) {
    case RouteKind::prefix: return "prefix";
    case RouteKind::balance: return "balance";
    case RouteKind::cold: return "cold";
  }
  return "unknown";
}

std::optional<RouteChoice> choose_node(std::span<const NodeLoad> nodes, std::size_t overload_margin) {
  std::optional<std::size_t> best, least;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const auto& n = nodes[i];
    if (!n.up) continue;
    if (!best || n.matched_tokens > nodes[*best].matched_tokens ||
        (n.matched_tokens == nodes[*best].matched_tokens && n.inflight < nodes[*best].inflight))
      best = i;
    if (!least || n.inflight < nodes[*least].inflight ||
        (n.inflight == nodes[*least].inflight && n.indexed_pages < nodes[*least].indexed_pages))
      least = i;
  }
  if (!best) return std::nullopt;
  const auto& b = nodes[*best];
  const auto& l = nodes[*least];
  if (b.matched_tokens == 0) {
    std::size_t roomiest = *least;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const auto& n = nodes[i];
      if (n.up && n.inflight <= l.inflight + overload_margin &&
          (n.indexed_pages < nodes[roomiest].indexed_pages ||
           (n.indexed_pages == nodes[roomiest].indexed_pages && n.inflight < nodes[roomiest].inflight)))
        roomiest = i;
    }
    return RouteChoice{roomiest, RouteKind::cold, 0};
  }
  if (b.inflight > l.inflight + overload_margin) return RouteChoice{*least, RouteKind::balance, l.matched_tokens};
  return RouteChoice{*best, RouteKind::prefix, b.matched_tokens};
}

}  // namespace arbor::cluster

// The key that names a cached KV page across processes: a chain hash, so page i's key
// stands for the whole prefix of pages 0..i of one tenant, as a radix tree's path does.
// The cache's KV events carry these keys (common/kv_event.hpp) and the cluster router's
// PrefixIndex (runtime/cluster/route_policy.hpp) computes them from the prompts it
// routes: both call the functions below, so their keys match by construction.
//
// Definition (stable; an external scheduler may recompute it from token ids):
//   seed(tenant) = mix(fnv1a64(tenant bytes) ^ tenant.size())
//   key(page i)  = h after h = mix(h ^ uint32(token)) for every token of page i,
//                  starting from h = key(page i-1), or seed(tenant) for page 0
// where fnv1a64 starts at 0xcbf29ce484222325 with prime 0x100000001b3 and mix is
// splitmix64's finaliser (below). Only full pages have keys.
// Keys of different tenants never coincide by design (the tenant seeds the chain),
// except by a 64-bit collision.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "cache/kv_geometry.hpp"

namespace arbor::cache {

using PageKey = std::uint64_t;

// splitmix64's finaliser: a cheap, well-mixed 64-bit hash step.
constexpr std::uint64_t page_key_mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// What page 0's key chains from.
constexpr PageKey page_key_seed(std::string_view tenant) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (char c : tenant) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return page_key_mix(h ^ tenant.size());
}

// The key of the page holding `page` (one page's tokens) after the page keyed `parent`
// (page_key_seed for the first page). O(page size).
constexpr PageKey next_page_key(PageKey parent, std::span<const TokenId> page) {
  for (TokenId t : page) parent = page_key_mix(parent ^ static_cast<std::uint32_t>(t));
  return parent;
}

// Keys of every full page of `ids` (a trailing partial page has none), root first.
// O(ids).
inline std::vector<PageKey> page_keys(std::string_view tenant, std::span<const TokenId> ids, std::size_t page_size) {
  std::vector<PageKey> keys;
  if (page_size == 0) return keys;
  const std::size_t num_pages = ids.size() / page_size;
  keys.reserve(num_pages);
  PageKey h = page_key_seed(tenant);
  for (std::size_t p = 0; p < num_pages; ++p) {
    h = next_page_key(h, ids.subspan(p * page_size, page_size));
    keys.push_back(h);
  }
  return keys;
}

}  // namespace arbor::cache

// KV events: what a KV cache tells schedulers about its pages, per tenant (in the style
// of vLLM's KV events). Defined once for every layer: the cache emits them
// (cache::PrefixCache::set_kv_event_listener), the runtime numbers and delivers them
// (Runtime::subscribe_kv_events), the server streams them (GET /v1/kv_events) and an
// `arbor node` forwards them to its router (runtime/cluster), which streams every
// node's events, each naming its node.
//
// Keys are page keys (cache/page_key.hpp): a chain hash of the tenant and every token
// up to the end of the page, so a key names a whole prefix and two tenants never share
// one. Every event carries exactly one tenant's pages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace arbor {

struct KvEvent {
  enum class Kind {
    stored,   // full pages newly committed to the tenant's tree (a page already cached is not repeated)
    removed,  // pages evicted from the tenant's tree, in eviction order (a leaf's tail page first)
    cleared,  // every page of `tenant` ("" = of every tenant) is gone, or the consumer lost
              // events: forget what you know of them
  };
  Kind kind = Kind::stored;
  // The namespace's tenant; "" for the shared namespace of published prefixes (and for
  // a cleared event that covers every tenant).
  std::string tenant = {};
  std::vector<std::uint64_t> keys = {};  // stored: root first, a chain; removed: as evicted
  std::optional<std::uint64_t> parent = {};  // stored: the key of the page before keys[0]; none at the root
  std::vector<std::int32_t> tokens = {};  // stored: the pages' token ids (keys.size() * page_size)
  std::size_t page_size = 0;            // tokens per page
  std::uint64_t sequence = 0;           // set by the runtime: 1, 2, 3, ... per Runtime, no gaps
  // On a cluster router's stream: the node ("host:port") whose cache made the event (a
  // cleared event with this node and tenant "": the router lost the node, forget its
  // pages). Empty from a single runtime.
  std::string node = {};
};

inline const char* to_string(KvEvent::Kind kind) {
  switch (kind) {
    case KvEvent::Kind::stored: return "stored";
    case KvEvent::Kind::removed: return "removed";
    case KvEvent::Kind::cleared: return "cleared";
  }
  return "unknown";
}

}  // namespace arbor

// PrefixCache: making room (quota, then global eviction), pins, priorities, publishing.
#include <cassert>
#include <optional>

#include "cache/prefix_cache.hpp"

namespace arbor::cache {

std::size_t PrefixCache::evict_from(TenantId ns, std::size_t num_pages) {
  std::vector<EvictedPage> evicted = tree(ns).evict(num_pages);
  TokenCounters* owner = ns == kSharedNamespace ? nullptr : &tenants_[std::size_t(ns)]->counters;
  std::size_t freed = 0;
  auto& keys = keys_of(ns);
  KvEvent removed{.kind = KvEvent::Kind::removed, .tenant = ns_name(ns),
                  .page_size = std::size_t(pool_.geometry().page_size)};
  for (const EvictedPage& e : evicted) {
    const bool is_free = pool_.refcount(e.page) == 0;
    freed += is_free;
    if (auto k = keys.find(e.page); k != keys.end()) {
      removed.keys.push_back(k->second);
      keys.erase(k);
    }
    if (listener_) listener_(EvictionEvent{ns, e.page, e.end_token, is_free});
  }
  if (kv_listener_ && !removed.keys.empty()) kv_listener_(removed);
  if (owner) owner->evicted_pages += evicted.size();
  total_.evicted_pages += evicted.size();
  return freed;
}

std::size_t PrefixCache::evict(std::size_t num_pages) {
  std::size_t freed = 0;
  while (freed < num_pages) {
    // The globally first victim: lowest (rank, last access), then namespace order.
    TenantId best_ns = kSharedNamespace;
    std::optional<EvictionCandidate> best = shared_tree_->next_victim();
    for (std::size_t i = 0; i < tenants_.size(); ++i) {
      auto c = tenants_[i]->tree->next_victim();
      if (c && (!best || std::pair(c->key.rank, c->key.last_access) <
                             std::pair(best->key.rank, best->key.last_access))) {
        best = c;
        best_ns = TenantId(i);
      }
    }
    if (!best) break;
    // Evicting within one leaf keeps it the first victim, so take what we need from it.
    freed += evict_from(best_ns, std::min(num_pages - freed, best->num_pages));
  }
  return freed;
}

Result<void> PrefixCache::make_room(TenantId tenant, std::size_t num_pages) {
  Tenant& t = *tenants_[std::size_t(tenant)];
  const std::size_t used = t.tree->num_pages() + t.private_pages;
  const std::size_t quota = t.config.quota_pages;
  const std::size_t over = quota > 0 && used + num_pages > quota ? used + num_pages - quota : 0;
  if (over > t.tree->evictable_pages())
    return fail(ErrorCode::out_of_memory,
                "tenant '" + t.name + "' needs " + std::to_string(num_pages) + " more KV pages but uses " +
                    std::to_string(used) + " of its quota of " + std::to_string(quota) + " and only " +
                    std::to_string(t.tree->evictable_pages()) +
                    " of its cached pages are unlocked; close sequences, unpin prefixes or raise quota_pages");
  // Idle pages are held only by unlocked tree nodes, so eviction can free all of them.
  const std::size_t available = std::size_t(pool_.num_free()) + std::size_t(pool_.num_idle());
  if (available < num_pages)
    return fail(ErrorCode::out_of_memory,
                "KV pool: " + std::to_string(num_pages) + " pages needed for tenant '" + t.name + "', " +
                    std::to_string(pool_.num_free()) + " free and " + std::to_string(pool_.num_idle()) +
                    " evictable of " + std::to_string(pool_.num_pages()) +
                    "; the rest are held by live sequences or pins: retry after some close, or enlarge the pool");
  if (over > 0) evict_from(tenant, over);
  if (std::size_t(pool_.num_free()) < num_pages) evict(num_pages - std::size_t(pool_.num_free()));
  if (std::size_t(pool_.num_free()) < num_pages)
    return fail(ErrorCode::internal, "make_room: eviction freed fewer pages than the idle count promised");
  return {};
}

Result<PinId> PrefixCache::pin(TenantId tenant, std::span<const TokenId> tokens) {
  if (!tenant_ptr(tenant)) return fail(ErrorCode::not_found, "pin: unknown tenant id " + std::to_string(tenant));
  Choice c = best_match(tenant, tokens);
  if (c.match.num_tokens == 0)
    return fail(ErrorCode::not_found, "pin: nothing of these " + std::to_string(tokens.size()) +
                                          " tokens is cached for tenant '" + tenants_[std::size_t(tenant)]->name +
                                          "'; commit the prefix before pinning it");
  const std::size_t pages = c.match.pages.size();
  if (pinned_pages_ + pages > std::size_t(config_.max_pinned_pages))
    return fail(ErrorCode::out_of_memory,
                "pin: " + std::to_string(pages) + " more pages would exceed max_pinned_pages (" +
                    std::to_string(pinned_pages_) + " of " + std::to_string(config_.max_pinned_pages) +
                    " pinned); unpin finished prefixes or raise max_pinned_pages");
  tree(c.ns).lock(c.match.node);
  PinId id = next_pin_++;
  pins_[id] = Pin{c.ns, c.match.node, pages};
  pinned_pages_ += pages;
  return id;
}

Result<void> PrefixCache::unpin(PinId pin) {
  auto it = pins_.find(pin);
  if (it == pins_.end()) return fail(ErrorCode::not_found, "unpin: pin " + std::to_string(pin) + " is not held");
  tree(it->second.ns).unlock(it->second.node);
  pinned_pages_ -= it->second.num_pages;
  pins_.erase(it);
  return {};
}

Result<std::size_t> PrefixCache::set_priority(TenantId tenant, std::span<const TokenId> tokens, int priority) {
  if (!tenant_ptr(tenant))
    return fail(ErrorCode::not_found, "set_priority: unknown tenant id " + std::to_string(tenant));
  return tree(tenant).set_priority(tokens, priority);
}

Result<std::size_t> PrefixCache::publish(TenantId tenant, std::span<const TokenId> tokens) {
  if (!tenant_ptr(tenant)) return fail(ErrorCode::not_found, "publish: unknown tenant id " + std::to_string(tenant));
  MatchResult m = tree(tenant).match_prefix(tokens, RadixTree::Touch::none);
  if (m.num_tokens == 0)
    return fail(ErrorCode::not_found, "publish: tenant '" + tenants_[std::size_t(tenant)]->name +
                                          "' has none of these tokens cached; commit them first");
  InsertResult r = shared_tree_->insert(tokens.first(m.num_tokens), m.pages);
  note_stored(kSharedNamespace, tokens.first(m.num_tokens), r);
  return m.num_tokens;
}

std::unordered_map<PageId, PageKey>& PrefixCache::keys_of(TenantId ns) {
  return ns == kSharedNamespace ? shared_keys_ : tenants_[std::size_t(ns)]->keys;
}

const std::string& PrefixCache::ns_name(TenantId ns) const {
  static const std::string shared;
  return ns == kSharedNamespace ? shared : tenants_[std::size_t(ns)]->name;
}

void PrefixCache::note_stored(TenantId ns, std::span<const TokenId> tokens, const InsertResult& r) {
  if (r.num_new_pages == 0) return;
  const std::size_t P = std::size_t(pool_.geometry().page_size);
  const std::size_t first = r.pages.size() - r.num_new_pages;  // a new leaf holds the tail
  auto& keys = keys_of(ns);
  std::optional<PageKey> parent;
  if (first > 0) {
    if (auto k = keys.find(r.pages[first - 1]); k != keys.end()) {
      parent = k->second;
    } else {  // not expected (every tree page is keyed); recompute the chain
      parent = page_keys(ns_name(ns), tokens.first(first * P), P).back();
    }
  }
  KvEvent stored{.kind = KvEvent::Kind::stored, .tenant = ns_name(ns), .parent = parent, .page_size = P};
  PageKey h = parent ? *parent : page_key_seed(ns_name(ns));
  for (std::size_t i = first; i < r.pages.size(); ++i) {
    h = next_page_key(h, tokens.subspan(i * P, P));
    keys[r.pages[i]] = h;
    stored.keys.push_back(h);
  }
  if (!kv_listener_) return;
  stored.tokens.assign(tokens.begin() + std::ptrdiff_t(first * P), tokens.begin() + std::ptrdiff_t(r.pages.size() * P));
  kv_listener_(stored);
}

void PrefixCache::set_kv_event_listener(std::function<void(const KvEvent&)> listener) {
  kv_listener_ = std::move(listener);
}

void PrefixCache::set_eviction_listener(std::function<void(const EvictionEvent&)> listener) {
  listener_ = std::move(listener);
}

}  // namespace arbor::cache

// PrefixCache: stats, tree summaries and the invariant audit.
#include <algorithm>
#include <deque>
#include <unordered_map>

#include "cache/prefix_cache.hpp"

namespace arbor::cache {

PrefixCacheStats PrefixCache::stats() const {
  PrefixCacheStats s;
  s.total = total_;
  s.pool = PoolStats{pool_.num_pages(), pool_.num_free(), pool_.num_used(), pool_.num_idle(),
                     pool_.num_protected()};
  s.shared_tree_pages = shared_tree_->num_pages();
  s.pinned_pages = pinned_pages_;
  s.num_sequences = int(sequences_.size());
  s.num_pins = int(pins_.size());
  return s;
}

Result<TenantStats> PrefixCache::tenant_stats(TenantId tenant) const {
  const Tenant* t = tenant_ptr(tenant);
  if (!t) return fail(ErrorCode::not_found, "tenant_stats: unknown tenant id " + std::to_string(tenant));
  TenantStats s;
  s.name = t->name;
  static_cast<TokenCounters&>(s) = t->counters;
  s.tree_pages = t->tree->num_pages();
  s.private_pages = t->private_pages;
  s.used_pages = s.tree_pages + s.private_pages;
  s.quota_pages = t->config.quota_pages;
  s.evictable_pages = t->tree->evictable_pages();
  s.num_sequences = t->num_sequences;
  return s;
}

Result<std::vector<CacheTreeNode>> PrefixCache::tree_summary(TenantId tenant, std::size_t max_nodes) const {
  const Tenant* t = tenant_ptr(tenant);
  if (!t) return fail(ErrorCode::not_found, "tree_summary: unknown tenant id " + std::to_string(tenant));
  constexpr std::size_t kFirstTokens = 8;
  std::vector<CacheTreeNode> out;
  auto add_tree = [&](const RadixTree& tr, bool shared) {
    std::deque<NodeId> queue;
    for (NodeId c : tr.children(kRootNode)) queue.push_back(c);
    while (!queue.empty() && out.size() < max_nodes) {
      const NodeId id = queue.front();
      queue.pop_front();
      const RadixNode& n = tr.node(id);
      CacheTreeNode s;
      s.id = n.serial;
      s.parent_id = n.parent == kRootNode ? 0 : tr.node(n.parent).serial;
      s.num_tokens = n.tokens.size();
      s.first_tokens.assign(n.tokens.begin(), n.tokens.begin() + std::ptrdiff_t(std::min(kFirstTokens, n.tokens.size())));
      s.depth_tokens = n.end();
      s.hit_count = n.access.hit_count;
      s.lock_count = n.lock_count;
      s.shared_namespace = shared;
      out.push_back(std::move(s));
      for (NodeId c : tr.children(id)) queue.push_back(c);
    }
  };
  add_tree(*t->tree, false);
  if (t->config.read_shared) add_tree(*shared_tree_, true);
  return out;
}

std::string PrefixCache::check_invariants() const {
  if (pool_.num_free() + pool_.num_used() != pool_.num_pages()) return "pool: free + used != total";
  if (auto e = shared_tree_->check_invariants(); !e.empty()) return "shared namespace: " + e;
  for (const auto& t : tenants_)
    if (auto e = t->tree->check_invariants(); !e.empty()) return "tenant '" + t->name + "': " + e;
  if (shared_keys_.size() != shared_tree_->num_pages()) return "shared namespace: page keys != tree pages";
  for (const auto& t : tenants_)
    if (t->keys.size() != t->tree->num_pages()) return "tenant '" + t->name + "': page keys != tree pages";
  return check_holders();
}

// Every page's refcount and protect count must equal what its holders account for, and
// every node's lock count what the sequences and pins below it hold.
std::string PrefixCache::check_holders() const {
  const std::size_t n = std::size_t(pool_.num_pages());
  std::vector<int> refs(n, 0), protects(n, 0);
  std::unordered_map<const RadixTree*, std::unordered_map<NodeId, int>> locks;
  auto count_tree = [&](const RadixTree& tr, const std::string& who) -> std::string {
    std::vector<char> seen(n, 0);
    std::string err;
    tr.for_each_node([&](NodeId id) {
      for (PageId p : tr.node(id).pages) {
        if (!pool_.valid(p)) { err = who + ": invalid page id " + std::to_string(p); return; }
        if (seen[std::size_t(p)]++) err = who + ": page " + std::to_string(p) + " appears twice in one tree";
        ++refs[std::size_t(p)];
        protects[std::size_t(p)] += tr.node(id).lock_count > 0;
      }
    });
    return err;
  };
  if (auto e = count_tree(*shared_tree_, "shared namespace"); !e.empty()) return e;
  for (const auto& t : tenants_)
    if (auto e = count_tree(*t->tree, "tenant '" + t->name + "'"); !e.empty()) return e;
  auto lock_path = [&](TenantId ns, NodeId node) {
    const RadixTree& tr = tree(ns);
    for (NodeId id = node; id != kRootNode; id = tr.node(id).parent) ++locks[&tr][id];
  };
  std::vector<std::size_t> private_pages(tenants_.size(), 0);
  for (const auto& [id, s] : sequences_) {
    const std::string who = "sequence " + std::to_string(id);
    for (PageId p : s.pages) {
      if (!pool_.valid(p)) return who + ": invalid page id " + std::to_string(p);
      ++refs[std::size_t(p)];
      ++protects[std::size_t(p)];
    }
    if (s.node != kRootNode) {
      if (!tree(s.locked_ns).is_live(s.node)) return who + ": locks a dead node";
      lock_path(s.locked_ns, s.node);
    }
    std::vector<PageId> path = tree(s.locked_ns).path_pages(s.node);
    if (path.size() != s.num_shared_pages ||
        !std::equal(path.begin(), path.end(), s.pages.begin()))
      return who + ": shared pages differ from its locked tree path";
    private_pages[std::size_t(s.tenant)] += s.pages.size() - s.num_shared_pages;
  }
  std::size_t pinned = 0;
  for (const auto& [id, pin] : pins_) {
    if (!tree(pin.ns).is_live(pin.node)) return "pin " + std::to_string(id) + " locks a dead node";
    lock_path(pin.ns, pin.node);
    pinned += pin.num_pages;
  }
  if (pinned != pinned_pages_) return "pinned page counter is stale";
  for (std::size_t i = 0; i < tenants_.size(); ++i)
    if (private_pages[i] != tenants_[i]->private_pages)
      return "tenant '" + tenants_[i]->name + "': private page counter is stale";
  auto check_locks = [&](const RadixTree& tr, const std::string& who) -> std::string {
    std::string err;
    tr.for_each_node([&](NodeId id) {
      auto& m = locks[&tr];
      const int want = m.contains(id) ? m[id] : 0;
      if (err.empty() && tr.node(id).lock_count != want)
        err = who + ": node " + std::to_string(id) + " has lock count " + std::to_string(tr.node(id).lock_count) +
              " but " + std::to_string(want) + " holders";
    });
    return err;
  };
  if (auto e = check_locks(*shared_tree_, "shared namespace"); !e.empty()) return e;
  for (const auto& t : tenants_)
    if (auto e = check_locks(*t->tree, "tenant '" + t->name + "'"); !e.empty()) return e;
  std::vector<char> on_free_list(n, 0);
  for (PageId p : pool_.free_pages()) {
    if (on_free_list[std::size_t(p)]++) return "pool: page " + std::to_string(p) + " is on the free list twice";
  }
  for (std::size_t p = 0; p < n; ++p) {
    const std::string page = "page " + std::to_string(p);
    if (pool_.refcount(PageId(p)) != refs[p])
      return page + ": refcount " + std::to_string(pool_.refcount(PageId(p))) + " but " + std::to_string(refs[p]) +
             " holders";
    if (pool_.protect_count(PageId(p)) != protects[p])
      return page + ": protect count " + std::to_string(pool_.protect_count(PageId(p))) + " but " +
             std::to_string(protects[p]) + " protecting holders";
    if ((refs[p] == 0) != bool(on_free_list[p])) return page + ": free-list membership disagrees with its refcount";
  }
  const auto num_protected = std::count_if(protects.begin(), protects.end(), [](int c) { return c > 0; });
  if (num_protected != pool_.num_protected()) return "pool: protected page counter is stale";
  // Private pages (KV rule 10): exactly one holder, the sequence that writes them.
  for (const auto& [id, s] : sequences_)
    for (std::size_t i = s.num_shared_pages; i < s.pages.size(); ++i)
      if (refs[std::size_t(s.pages[i])] != 1)
        return "sequence " + std::to_string(id) + ": private page " + std::to_string(s.pages[i]) +
               " has another holder";
  return "";
}

}  // namespace arbor::cache

#include "cache/radix_tree.hpp"

#include <algorithm>
#include <cassert>

namespace arbor::cache {

RadixTree::RadixTree(int page_size, PagePool& pool, const EvictionPolicy& policy,
                     LogicalClock& clock)
    : page_size_(page_size), pool_(pool), policy_(policy), clock_(clock) {
  assert(page_size > 0);
  nodes_.emplace_back();
  nodes_[0].live = true;
  filed_.emplace_back();
}

RadixTree::~RadixTree() {
  // The tree's references go back to the pool (the pool may already be gone only if
  // the owner destroys them in the wrong order; PrefixCache declares the pool first).
  for (const auto& n : nodes_) {
    if (!n.live) continue;
    if (n.lock_count > 0)
      for (PageId p : n.pages) pool_.unprotect(p);
    for (PageId p : n.pages) pool_.unref(p);
  }
}

std::uint64_t RadixTree::page_hash(std::span<const TokenId> page) const {
  std::uint64_t h = 0x9E3779B97F4A7C15ull;
  for (TokenId t : page) {
    h ^= std::uint32_t(t);
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
  }
  return h;
}

NodeId RadixTree::find_child(NodeId parent, std::span<const TokenId> first_page) const {
  const auto& children = nodes_[std::size_t(parent)].children;
  auto it = children.find(page_hash(first_page));
  if (it == children.end()) return kNoNode;
  for (NodeId id = it->second; id != kNoNode; id = nodes_[std::size_t(id)].next_same_key) {
    const auto& tokens = nodes_[std::size_t(id)].tokens;
    if (std::equal(first_page.begin(), first_page.end(), tokens.begin())) return id;
  }
  return kNoNode;
}

void RadixTree::add_child(NodeId parent, NodeId child) {
  auto& c = nodes_[std::size_t(child)];
  c.parent = parent;
  auto [it, inserted] = nodes_[std::size_t(parent)].children.try_emplace(c.key, child);
  c.next_same_key = inserted ? kNoNode : it->second;
  it->second = child;
}

void RadixTree::remove_child(NodeId parent, NodeId child) {
  auto& children = nodes_[std::size_t(parent)].children;
  auto& c = nodes_[std::size_t(child)];
  auto it = children.find(c.key);
  assert(it != children.end());
  if (it->second == child) {
    if (c.next_same_key == kNoNode) children.erase(it);
    else it->second = c.next_same_key;
  } else {
    NodeId prev = it->second;
    while (nodes_[std::size_t(prev)].next_same_key != child) prev = nodes_[std::size_t(prev)].next_same_key;
    nodes_[std::size_t(prev)].next_same_key = c.next_same_key;
  }
  c.next_same_key = kNoNode;
}

NodeId RadixTree::new_node() {
  NodeId id;
  if (!free_nodes_.empty()) {
    id = free_nodes_.back();
    free_nodes_.pop_back();
  } else {
    id = NodeId(nodes_.size());
    nodes_.emplace_back();
    filed_.emplace_back();
  }
  auto& n = nodes_[std::size_t(id)];
  n = RadixNode{};
  n.live = true;
  n.serial = next_serial_++;
  return id;
}

void RadixTree::free_node(NodeId id) {
  nodes_[std::size_t(id)] = RadixNode{};
  filed_[std::size_t(id)].reset();
  free_nodes_.push_back(id);
}

NodeId RadixTree::split(NodeId node, std::size_t num_pages) {
  const std::size_t num_tokens = num_pages * std::size_t(page_size_);
  NodeId upper = new_node();  // may reallocate nodes_: take references after it
  auto& n = nodes_[std::size_t(node)];
  auto& u = nodes_[std::size_t(upper)];
  NodeId parent = n.parent;
  u.start = n.start;
  u.tokens.assign(n.tokens.begin(), n.tokens.begin() + std::ptrdiff_t(num_tokens));
  u.pages.assign(n.pages.begin(), n.pages.begin() + std::ptrdiff_t(num_pages));
  u.key = n.key;
  u.lock_count = n.lock_count;  // every lock through the lower part passes the upper
  u.access = n.access;
  remove_child(parent, node);
  add_child(parent, upper);
  n.tokens.erase(n.tokens.begin(), n.tokens.begin() + std::ptrdiff_t(num_tokens));
  n.pages.erase(n.pages.begin(), n.pages.begin() + std::ptrdiff_t(num_pages));
  n.start += num_tokens;
  n.key = page_hash(std::span<const TokenId>(n.tokens).first(std::size_t(page_size_)));
  add_child(upper, node);
  return upper;  // not a leaf, so never evictable; `node` keeps its filing
}

RadixTree::Walk RadixTree::walk(std::span<const TokenId> tokens, std::vector<PageId>* pages) {
  const std::size_t P = std::size_t(page_size_);
  const std::size_t total = tokens.size() / P;
  Walk w;
  while (w.num_pages < total) {
    auto rest = tokens.subspan(w.num_pages * P);
    NodeId child = find_child(w.node, rest.first(P));
    if (child == kNoNode) break;
    const auto& c = nodes_[std::size_t(child)];
    const std::size_t edge_pages = c.pages.size();
    const std::size_t limit = std::min(edge_pages, total - w.num_pages);
    std::size_t m = 1;  // find_child compared the first page
    while (m < limit && std::equal(rest.begin() + std::ptrdiff_t(m * P),
                                   rest.begin() + std::ptrdiff_t((m + 1) * P),
                                   c.tokens.begin() + std::ptrdiff_t(m * P)))
      ++m;
    if (pages) pages->insert(pages->end(), c.pages.begin(), c.pages.begin() + std::ptrdiff_t(m));
    w.num_pages += m;
    if (m < edge_pages) {
      w.node = split(child, m);
      break;
    }
    w.node = child;
  }
  return w;
}

MatchResult RadixTree::match_prefix(std::span<const TokenId> tokens, Touch touch) {
  MatchResult r;
  Walk w = walk(tokens, &r.pages);
  r.num_tokens = w.num_pages * std::size_t(page_size_);
  r.node = w.node;
  if (touch == Touch::hit) record_hit(w.node);
  return r;
}

void RadixTree::record_hit(NodeId node) {
  if (node == kRootNode) return;
  const std::uint64_t now = clock_.tick();
  for (NodeId n = node; n != kRootNode; n = nodes_[std::size_t(n)].parent) {
    auto& access = nodes_[std::size_t(n)].access;
    access.last_access = now;
    ++access.hit_count;
    refresh_evictable(n);
  }
}

std::vector<PageId> RadixTree::path_pages(NodeId id) const {
  std::vector<NodeId> path;
  for (NodeId n = id; n != kRootNode; n = nodes_[std::size_t(n)].parent) path.push_back(n);
  std::vector<PageId> pages;
  for (auto it = path.rbegin(); it != path.rend(); ++it) {
    const auto& p = nodes_[std::size_t(*it)].pages;
    pages.insert(pages.end(), p.begin(), p.end());
  }
  return pages;
}

InsertResult RadixTree::insert(std::span<const TokenId> tokens, std::span<const PageId> pages) {
  const std::size_t P = std::size_t(page_size_);
  const std::size_t total = tokens.size() / P;
  assert(pages.size() >= total);
  InsertResult r;
  r.pages.reserve(total);
  Walk w = walk(tokens.first(total * P), &r.pages);
  for (std::size_t i = 0; i < w.num_pages; ++i)
    if (r.pages[i] != pages[i]) r.duplicates.push_back(i);
  NodeId cur = w.node;
  if (w.num_pages < total) {
    // The walk stopped at a node end (a split if needed): the rest is a new leaf.
    NodeId leaf = new_node();
    auto& l = nodes_[std::size_t(leaf)];
    l.start = w.num_pages * P;
    l.tokens.assign(tokens.begin() + std::ptrdiff_t(w.num_pages * P),
                    tokens.begin() + std::ptrdiff_t(total * P));
    l.pages.assign(pages.begin() + std::ptrdiff_t(w.num_pages), pages.begin() + std::ptrdiff_t(total));
    l.key = page_hash(std::span<const TokenId>(l.tokens).first(P));
    for (PageId p : l.pages) pool_.ref(p);
    r.pages.insert(r.pages.end(), l.pages.begin(), l.pages.end());
    r.num_new_pages = l.pages.size();
    num_pages_ += l.pages.size();
    evictable_pages_ += l.pages.size();
    add_child(cur, leaf);
    if (cur != kRootNode) refresh_evictable(cur);  // no longer a leaf
    cur = leaf;
  }
  r.node = cur;
  const std::uint64_t now = clock_.tick();
  for (NodeId n = cur; n != kRootNode; n = nodes_[std::size_t(n)].parent) {
    nodes_[std::size_t(n)].access.last_access = now;
    refresh_evictable(n);
  }
  return r;
}

void RadixTree::lock(NodeId node) {
  for (NodeId id = node; id != kRootNode; id = nodes_[std::size_t(id)].parent) {
    auto& n = nodes_[std::size_t(id)];
    if (n.lock_count++ > 0) continue;
    evictable_pages_ -= n.pages.size();
    protected_pages_ += n.pages.size();
    for (PageId p : n.pages) pool_.protect(p);
    drop_evictable(id);
  }
}

void RadixTree::unlock(NodeId node) {
  for (NodeId id = node; id != kRootNode; id = nodes_[std::size_t(id)].parent) {
    auto& n = nodes_[std::size_t(id)];
    assert(n.lock_count > 0 && "unlock without lock");
    if (--n.lock_count > 0) continue;
    evictable_pages_ += n.pages.size();
    protected_pages_ -= n.pages.size();
    for (PageId p : n.pages) pool_.unprotect(p);
    refresh_evictable(id);
  }
}

std::size_t RadixTree::set_priority(std::span<const TokenId> tokens, int priority) {
  Walk w = walk(tokens, nullptr);
  for (NodeId n = w.node; n != kRootNode; n = nodes_[std::size_t(n)].parent) {
    nodes_[std::size_t(n)].access.priority = priority;
    refresh_evictable(n);
  }
  return w.num_pages * std::size_t(page_size_);
}

std::vector<EvictedPage> RadixTree::evict(std::size_t num_pages) {
  const std::size_t P = std::size_t(page_size_);
  std::vector<EvictedPage> out;
  while (out.size() < num_pages && !evictable_.empty()) {
    const NodeId id = evictable_.begin()->node;
    auto& n = nodes_[std::size_t(id)];
    const std::size_t k = std::min(num_pages - out.size(), n.pages.size());
    for (std::size_t i = 0; i < k; ++i) {
      out.push_back({n.pages.back(), n.end()});
      pool_.unref(n.pages.back());
      n.pages.pop_back();
      n.tokens.resize(n.tokens.size() - P);
    }
    num_pages_ -= k;
    evictable_pages_ -= k;
    if (!n.pages.empty()) continue;  // key unchanged: still the first victim
    const NodeId parent = n.parent;
    drop_evictable(id);
    remove_child(parent, id);
    free_node(id);
    if (parent != kRootNode) refresh_evictable(parent);
  }
  return out;
}

std::optional<EvictionCandidate> RadixTree::next_victim() const {
  if (evictable_.empty()) return std::nullopt;
  const EvictionKey& key = *evictable_.begin();
  return EvictionCandidate{key, nodes_[std::size_t(key.node)].pages.size()};
}

std::vector<NodeId> RadixTree::children(NodeId id) const {
  std::vector<NodeId> out;
  for (const auto& [key, head] : nodes_[std::size_t(id)].children)
    for (NodeId c = head; c != kNoNode; c = nodes_[std::size_t(c)].next_same_key) out.push_back(c);
  std::sort(out.begin(), out.end(), [&](NodeId a, NodeId b) {
    return nodes_[std::size_t(a)].serial < nodes_[std::size_t(b)].serial;
  });
  return out;
}

EvictionKey RadixTree::key_of(NodeId id) const {
  const auto& access = nodes_[std::size_t(id)].access;
  return {policy_.rank(access), access.last_access, id};
}

void RadixTree::drop_evictable(NodeId id) {
  auto& filed = filed_[std::size_t(id)];
  if (!filed) return;
  evictable_.erase(*filed);
  filed.reset();
}

void RadixTree::refresh_evictable(NodeId id) {
  const auto& n = nodes_[std::size_t(id)];
  const bool evictable = id != kRootNode && n.live && n.lock_count == 0 && n.is_leaf();
  auto& filed = filed_[std::size_t(id)];
  if (!evictable) {
    drop_evictable(id);
    return;
  }
  EvictionKey key = key_of(id);
  if (filed && *filed == key) return;
  if (filed) evictable_.erase(*filed);
  evictable_.insert(key);
  filed = key;
}

}  // namespace arbor::cache

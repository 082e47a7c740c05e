// RadixTree::check_invariants: a full O(tree size) audit, for tests and debug builds.
#include <string>

#include "cache/radix_tree.hpp"

namespace arbor::cache {
namespace {

std::string at(NodeId id, const std::string& what) {
  return "radix node " + std::to_string(id) + ": " + what;
}

}  // namespace

std::string RadixTree::check_invariants() const {
  const std::size_t P = std::size_t(page_size_);
  if (!nodes_[0].live || nodes_[0].parent != kNoNode || !nodes_[0].tokens.empty())
    return "radix root is malformed";
  std::size_t pages = 0, evictable = 0, protected_pages = 0, filed = 0, live = 1;
  std::vector<int> child_locks(nodes_.size(), 0);
  for (std::size_t i = 1; i < nodes_.size(); ++i) {
    const auto& n = nodes_[i];
    if (!n.live) continue;
    ++live;
    const NodeId id = NodeId(i);
    if (n.pages.empty() || n.tokens.size() != n.pages.size() * P)
      return at(id, "edge of " + std::to_string(n.tokens.size()) + " tokens holds " +
                        std::to_string(n.pages.size()) + " pages (page size " + std::to_string(P) + ")");
    if (!is_live(n.parent)) return at(id, "parent is not live");
    const auto& parent = nodes_[std::size_t(n.parent)];
    if (n.start != parent.end()) return at(id, "start does not continue the parent's edge");
    if (n.key != page_hash(std::span<const TokenId>(n.tokens).first(P)))
      return at(id, "child key is not the hash of its first page");
    if (find_child(n.parent, std::span<const TokenId>(n.tokens).first(P)) != id)
      return at(id, "parent does not find it by its first page");
    if (n.lock_count < 0) return at(id, "negative lock count");
    child_locks[std::size_t(n.parent)] += n.lock_count;
    pages += n.pages.size();
    (n.lock_count > 0 ? protected_pages : evictable) += n.pages.size();
    const bool should_file = n.lock_count == 0 && n.is_leaf();
    const auto& f = filed_[i];
    if (should_file != f.has_value())
      return at(id, should_file ? "unlocked leaf missing from the evictable set"
                                : "filed as evictable but locked or inner");
    if (f) {
      ++filed;
      if (*f != key_of(id) || !evictable_.contains(*f))
        return at(id, "stale eviction key");
    }
  }
  for (std::size_t i = 1; i < nodes_.size(); ++i) {
    if (!nodes_[i].live) continue;
    if (nodes_[i].lock_count < child_locks[i])
      return at(NodeId(i), "lock count below the sum of its children's");
    for (NodeId c : children(NodeId(i)))
      if (!is_live(c) || nodes_[std::size_t(c)].parent != NodeId(i))
        return at(NodeId(i), "lists a child that is not its own");
  }
  for (NodeId c : children(kRootNode))
    if (!is_live(c) || nodes_[std::size_t(c)].parent != kRootNode) return "root lists a foreign child";
  if (pages != num_pages_) return "radix tree: num_pages counter is stale";
  if (evictable != evictable_pages_) return "radix tree: evictable_pages counter is stale";
  if (protected_pages != protected_pages_) return "radix tree: protected_pages counter is stale";
  if (filed != evictable_.size()) return "radix tree: evictable set holds dead entries";
  if (live != num_nodes()) return "radix tree: node free list is inconsistent";
  return "";
}

}  // namespace arbor::cache

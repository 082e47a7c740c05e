#include "cache/radix_tree.hpp"

#include <gtest/gtest.h>

#include <numeric>

namespace arbor::cache {
namespace {

using Tokens = std::vector<TokenId>;
using Pages = std::vector<PageId>;
constexpr int P = 4;
const KvGeometry kGeom{.num_layers = 1, .num_kv_heads = 1, .head_dim = 4, .page_size = P};

Tokens run(TokenId first, std::size_t n) {
  Tokens t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}
Tokens cat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class RadixTreeTest : public ::testing::Test {
 protected:
  explicit RadixTreeTest(EvictionPolicyKind kind = EvictionPolicyKind::lru)
      : pool_(kGeom, 64, alloc_), policy_(make_eviction_policy(kind)), tree_(P, pool_, *policy_, clock_) {}

  // Allocates pages for the full pages of `tokens`, inserts them, and drops the
  // allocation reference so the tree is the only holder. Returns the pages.
  Pages add(const Tokens& tokens) {
    Pages pages = *pool_.allocate(int(tokens.size() / P));
    InsertResult r = tree_.insert(tokens, pages);
    for (PageId p : pages) pool_.unref(p);
    EXPECT_EQ(tree_.check_invariants(), "");
    return r.pages;
  }
  Pages evicted(std::size_t n) {
    Pages out;
    for (const auto& e : tree_.evict(n)) out.push_back(e.page);
    EXPECT_EQ(tree_.check_invariants(), "");
    return out;
  }

  HostPageAllocator alloc_;
  PagePool pool_;
  std::unique_ptr<EvictionPolicy> policy_;
  LogicalClock clock_;
  RadixTree tree_;
};

TEST_F(RadixTreeTest, EmptyTreeMatchesNothing) {
  MatchResult m = tree_.match_prefix(run(0, 12));
  EXPECT_EQ(m.num_tokens, 0u);
  EXPECT_TRUE(m.pages.empty());
  EXPECT_EQ(m.node, kRootNode);
}

TEST_F(RadixTreeTest, InsertKeepsOnlyFullPagesAndMatchReturnsThem) {
  Pages pages = add(run(100, 10));  // 2 full pages + 2 tokens
  EXPECT_EQ(pages, (Pages{0, 1}));
  EXPECT_EQ(tree_.num_pages(), 2u);
  EXPECT_EQ(pool_.num_used(), 2);  // the partial page's allocation was never taken
  MatchResult m = tree_.match_prefix(run(100, 12));
  EXPECT_EQ(m.num_tokens, 8u);
  EXPECT_EQ(m.pages, (Pages{0, 1}));
  EXPECT_EQ(tree_.match_prefix(run(100, 7)).num_tokens, 4u);  // page-aligned
  EXPECT_EQ(tree_.match_prefix(run(101, 12)).num_tokens, 0u);  // position matters
}

TEST_F(RadixTreeTest, MatchEndingMidEdgeSplitsWithoutChangingContent) {
  add(run(0, 12));
  EXPECT_EQ(tree_.num_nodes(), 2u);
  MatchResult m = tree_.match_prefix(run(0, 8));
  EXPECT_EQ(m.num_tokens, 8u);
  EXPECT_EQ(m.pages, (Pages{0, 1}));
  EXPECT_EQ(tree_.num_nodes(), 3u);
  EXPECT_EQ(tree_.node(m.node).end(), 8u);
  EXPECT_FALSE(tree_.node(m.node).is_leaf());
  EXPECT_EQ(tree_.match_prefix(run(0, 12)).pages, (Pages{0, 1, 2}));
  EXPECT_EQ(tree_.check_invariants(), "");
}

TEST_F(RadixTreeTest, DivergenceInsidePageSharesOnlyWholePages) {
  add(run(0, 12));
  Tokens other = run(0, 12);
  other[6] = 999;  // differs inside page 1
  Pages pages = *pool_.allocate(3);
  InsertResult r = tree_.insert(other, pages);
  EXPECT_EQ(r.pages, (Pages{0, pages[1], pages[2]}));
  EXPECT_EQ(r.duplicates, (std::vector<std::size_t>{0}));
  EXPECT_EQ(r.num_new_pages, 2u);
  EXPECT_EQ(tree_.num_nodes(), 4u);  // shared page, two branches
  EXPECT_EQ(tree_.match_prefix(other).pages, (Pages{0, pages[1], pages[2]}));
  EXPECT_EQ(tree_.check_invariants(), "");
}

TEST_F(RadixTreeTest, SiblingsMayShareTheirFirstToken) {
  Tokens a = run(0, 8), b = run(0, 8);
  b[3] = 77;
  add(a);
  Pages pb = add(b);
  EXPECT_EQ(tree_.match_prefix(a).pages, (Pages{0, 1}));
  EXPECT_EQ(tree_.match_prefix(b).pages, pb);
  EXPECT_EQ(tree_.children(kRootNode).size(), 2u);
}

TEST_F(RadixTreeTest, InsertOfCachedPrefixKeepsTreePagesAndReportsDuplicates) {
  add(run(0, 12));
  Pages mine = *pool_.allocate(4);
  InsertResult r = tree_.insert(run(0, 16), mine);
  EXPECT_EQ(r.pages, (Pages{0, 1, 2, mine[3]}));
  EXPECT_EQ(r.duplicates, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(r.num_new_pages, 1u);
  EXPECT_EQ(pool_.refcount(mine[0]), 1);  // still only the caller's: it drops it
  EXPECT_EQ(pool_.refcount(mine[3]), 2);  // caller + tree
}

TEST_F(RadixTreeTest, LockProtectsPathAndTracksSizes) {
  add(run(0, 8));
  Pages b = add(cat(run(0, 8), run(50, 8)));
  EXPECT_EQ(tree_.evictable_pages(), 4u);
  NodeId leaf = tree_.match_prefix(cat(run(0, 8), run(50, 8))).node;
  tree_.lock(leaf);
  EXPECT_EQ(tree_.evictable_pages(), 0u);
  EXPECT_EQ(tree_.protected_pages(), 4u);
  EXPECT_EQ(pool_.num_protected(), 4);
  EXPECT_TRUE(tree_.evict(10).empty());
  tree_.lock(leaf);
  tree_.unlock(leaf);
  EXPECT_EQ(tree_.protected_pages(), 4u);
  tree_.unlock(leaf);
  EXPECT_EQ(tree_.evictable_pages(), 4u);
  EXPECT_EQ(pool_.num_protected(), 0);
  EXPECT_EQ(tree_.check_invariants(), "");
}

TEST_F(RadixTreeTest, EvictZeroIsANoOp) {
  add(run(0, 8));
  EXPECT_TRUE(tree_.evict(0).empty());
  EXPECT_EQ(tree_.num_pages(), 2u);
}

TEST_F(RadixTreeTest, LruEvictsLeastRecentLeafTailFirst) {
  Pages a = add(run(0, 8));     // a: 0 1
  Pages b = add(run(100, 8));   // b: 2 3
  Pages c = add(run(200, 12));  // c: 4 5 6
  tree_.match_prefix(run(0, 8));  // a becomes most recent
  EXPECT_EQ(evicted(3), (Pages{3, 2, 6}));  // all of b, then c's tail
  EXPECT_EQ(tree_.match_prefix(run(200, 12)).pages, (Pages{4, 5}));
  EXPECT_EQ(evicted(10), (Pages{1, 0, 5, 4}));  // a was touched before c's match above
  EXPECT_EQ(pool_.num_free(), 64);
}

TEST_F(RadixTreeTest, SharedPrefixOutlivesItsSuffixes) {
  Tokens prefix = run(0, 8);
  EXPECT_EQ(add(cat(prefix, run(100, 4))), (Pages{0, 1, 2}));
  // Allocated 3 4 5 6; the tree keeps its own 0 1 and takes 5 6.
  EXPECT_EQ(add(cat(prefix, run(200, 8))), (Pages{0, 1, 5, 6}));
  // The prefix is no leaf until both suffixes go.
  EXPECT_EQ(evicted(10), (Pages{2, 6, 5, 1, 0}));
}

TEST_F(RadixTreeTest, LockedSuffixKeepsItsPrefix) {
  Tokens prefix = run(0, 8);
  EXPECT_EQ(add(cat(prefix, run(100, 4))), (Pages{0, 1, 2}));
  EXPECT_EQ(add(cat(prefix, run(200, 4))), (Pages{0, 1, 5}));
  NodeId first = tree_.match_prefix(cat(prefix, run(100, 4))).node;
  tree_.lock(first);
  EXPECT_EQ(evicted(10), (Pages{5}));
  EXPECT_EQ(tree_.protected_pages(), 3u);
  tree_.unlock(first);
  EXPECT_EQ(evicted(10), (Pages{2, 1, 0}));
}

class RadixTreeLfuTest : public RadixTreeTest {
 protected:
  RadixTreeLfuTest() : RadixTreeTest(EvictionPolicyKind::lfu) {}
};

TEST_F(RadixTreeLfuTest, EvictsFewestHitsFirstTiesByLru) {
  add(run(0, 4));    // a: 0
  add(run(100, 4));  // b: 1
  add(run(200, 4));  // c: 2
  add(run(300, 4));  // d: 3
  for (int i = 0; i < 3; ++i) tree_.match_prefix(run(0, 4));
  tree_.match_prefix(run(100, 4));
  // c and d have 0 hits (c older), b 1, a 3.
  EXPECT_EQ(evicted(4), (Pages{2, 3, 1, 0}));
}

class RadixTreePriorityTest : public RadixTreeTest {
 protected:
  RadixTreePriorityTest() : RadixTreeTest(EvictionPolicyKind::priority) {}
};

TEST_F(RadixTreePriorityTest, EvictsLowestPriorityFirstTiesByLru) {
  add(run(0, 4));    // a: 0
  add(run(100, 4));  // b: 1
  add(run(200, 4));  // c: 2
  add(run(300, 4));  // d: 3
  EXPECT_EQ(tree_.set_priority(run(0, 4), 5), 4u);
  EXPECT_EQ(tree_.set_priority(run(200, 4), -1), 4u);
  tree_.match_prefix(run(100, 4));  // b more recent than d, both priority 0
  EXPECT_EQ(evicted(4), (Pages{2, 3, 1, 0}));
}

TEST_F(RadixTreePriorityTest, PriorityCoversExactlyThePrefix) {
  Tokens prefix = run(0, 8);
  add(cat(prefix, run(100, 8)));  // 0 1 | 2 3
  EXPECT_EQ(tree_.set_priority(prefix, 9), 8u);  // splits after the prefix
  add(run(500, 4));  // 4, priority 0, newest
  // The suffix keeps priority 0 and is older than page 4; the prefix (9) goes last.
  EXPECT_EQ(evicted(10), (Pages{3, 2, 4, 1, 0}));
}

}  // namespace
}  // namespace arbor::cache

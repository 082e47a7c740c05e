#include "cache/prefix_cache.hpp"

#include <gtest/gtest.h>

#include "cache_test_util.hpp"

namespace arbor::cache {
namespace {

using namespace arbor::cache::testing;

class PrefixCacheTest : public ::testing::Test {
 protected:
  explicit PrefixCacheTest(int num_pages = 32, int max_pinned = 0)
      : cache_(kGeom, PrefixCacheConfig{num_pages, EvictionPolicyKind::lru, max_pinned, "m"}, alloc_) {
    tenant_ = *cache_.add_tenant("a");
  }
  void TearDown() override { EXPECT_EQ(cache_.check_invariants(), ""); }

  HostPageAllocator alloc_;
  PrefixCache cache_;
  TenantId tenant_ = 0;
};

TEST_F(PrefixCacheTest, ValidateRejectsBadConfig) {
  EXPECT_TRUE(PrefixCache::validate(kGeom, {8, EvictionPolicyKind::lru, 0, "m"}));
  EXPECT_EQ(PrefixCache::validate(kGeom, {0, EvictionPolicyKind::lru, 0, "m"}).error().code,
            ErrorCode::invalid_argument);
  EXPECT_FALSE(PrefixCache::validate(KvGeometry{}, {8, EvictionPolicyKind::lru, 0, "m"}));
  EXPECT_FALSE(PrefixCache::validate(kGeom, {8, EvictionPolicyKind::lru, 9, "m"}));
}

TEST_F(PrefixCacheTest, TenantsAreFoundByName) {
  EXPECT_EQ(*cache_.find_tenant("a"), tenant_);
  EXPECT_EQ(cache_.find_tenant("b").error().code, ErrorCode::not_found);
  EXPECT_FALSE(cache_.add_tenant("a"));
  EXPECT_FALSE(cache_.add_tenant("big", {.quota_pages = 33}));
}

TEST_F(PrefixCacheTest, CommitThenHitWithPrivateTailPages) {
  Tokens prompt = run(0, 10);
  Prefilled first = prefill(cache_, tenant_, prompt);
  EXPECT_EQ(first.matched, 0u);
  EXPECT_EQ(table(cache_, first.seq), (Pages{0, 1, 2}));
  // Another sequence with the same prompt adopts the two full pages; its tail is its own.
  Prefilled second = prefill(cache_, tenant_, prompt);
  EXPECT_EQ(second.matched, 8u);
  EXPECT_EQ(table(cache_, second.seq), (Pages{0, 1, 3}));
  auto info = *cache_.sequence_info(second.seq);
  EXPECT_EQ(info.num_shared_pages, 2u);
  EXPECT_EQ(info.writable_from, 8u);
  EXPECT_EQ(cache_.pool().refcount(0), 3);  // tree + two sequences
  EXPECT_EQ(cache_.pool().refcount(2), 1);
  EXPECT_EQ(cache_.pool().refcount(3), 1);
}

TEST_F(PrefixCacheTest, TwoSequencesAppendingAfterSharedPrefixGetDistinctTails) {
  Tokens prefix = run(0, 8);
  prefill(cache_, tenant_, cat(prefix, {1}));  // caches the 8-token prefix
  SeqId x = *cache_.open_sequence(tenant_), y = *cache_.open_sequence(tenant_);
  for (SeqId s : {x, y}) {
    EXPECT_EQ(*cache_.match(s, cat(prefix, {5}), 8), 8u);
    ASSERT_TRUE(cache_.reserve(s, 11));
  }
  Pages tx = table(cache_, x), ty = table(cache_, y);
  EXPECT_EQ(Pages(tx.begin(), tx.begin() + 2), Pages(ty.begin(), ty.begin() + 2));
  EXPECT_NE(tx[2], ty[2]);
  // Each writes its own tail and commits; the tails stay private.
  ASSERT_TRUE(cache_.commit(x, cat(prefix, {7, 7, 7})));
  ASSERT_TRUE(cache_.commit(y, cat(prefix, {8, 8, 8})));
  EXPECT_EQ(cache_.pool().refcount(tx[2]), 1);
  EXPECT_EQ(cache_.pool().refcount(ty[2]), 1);
}

TEST_F(PrefixCacheTest, MatchIsCappedAndPageAligned) {
  prefill(cache_, tenant_, run(0, 13));  // caches 12 tokens
  SeqId s = *cache_.open_sequence(tenant_);
  EXPECT_EQ(*cache_.match(s, run(0, 12), 11), 8u);  // len-1 leaves the last page to compute
  EXPECT_EQ(table(cache_, s), (Pages{0, 1}));
  EXPECT_EQ(cache_.match(s, run(0, 12), 11).error().code, ErrorCode::invalid_argument);
}

TEST_F(PrefixCacheTest, ConcurrentComputeOfSamePromptKeepsOneCopy) {
  Tokens prompt = run(0, 9);
  SeqId x = *cache_.open_sequence(tenant_), y = *cache_.open_sequence(tenant_);
  for (SeqId s : {x, y}) {
    EXPECT_EQ(*cache_.match(s, prompt, 8), 0u);
    ASSERT_TRUE(cache_.reserve(s, 9));
  }
  EXPECT_EQ(table(cache_, x), (Pages{0, 1, 2}));
  EXPECT_EQ(table(cache_, y), (Pages{3, 4, 5}));
  ASSERT_TRUE(cache_.commit(x, prompt));
  ASSERT_TRUE(cache_.commit(y, prompt));
  EXPECT_EQ(table(cache_, y), (Pages{0, 1, 5}));  // y's copies 3, 4 are freed
  EXPECT_EQ(cache_.pool().refcount(3), 0);
  EXPECT_EQ(cache_.stats().pool.used_pages, 4);
  EXPECT_EQ(cache_.check_invariants(), "");
}

TEST_F(PrefixCacheTest, CloseReleasesLocksButKeepsCachedPages) {
  Prefilled p = prefill(cache_, tenant_, run(0, 10));
  EXPECT_EQ(cache_.stats().pool.protected_pages, 3);
  ASSERT_TRUE(cache_.close(p.seq));
  PrefixCacheStats s = cache_.stats();
  EXPECT_EQ(s.pool.used_pages, 2);
  EXPECT_EQ(s.pool.idle_pages, 2);
  EXPECT_EQ(s.pool.protected_pages, 0);
  EXPECT_EQ(s.num_sequences, 0);
  EXPECT_EQ(cache_.close(p.seq).error().code, ErrorCode::not_found);
  EXPECT_TRUE(cache_.page_table(p.seq).empty());
}

TEST_F(PrefixCacheTest, CommitRejectsTokensItCannotHold) {
  SeqId s = *cache_.open_sequence(tenant_);
  ASSERT_TRUE(cache_.reserve(s, 8));
  EXPECT_EQ(cache_.commit(s, run(0, 9)).error().code, ErrorCode::invalid_argument);
  ASSERT_TRUE(cache_.commit(s, run(0, 8)));
  EXPECT_EQ(cache_.commit(s, run(1, 8)).error().code, ErrorCode::invalid_argument);
  ASSERT_TRUE(cache_.reserve(s, 12));
  ASSERT_TRUE(cache_.commit(s, run(0, 12)));  // extends: the new page joins the tree
  EXPECT_EQ(cache_.tenant_stats(tenant_)->tree_pages, 3u);
  EXPECT_EQ(cache_.sequence_info(s)->num_shared_pages, 3u);
}

TEST_F(PrefixCacheTest, ReserveEvictsLruUnderPressureAndFailsCleanlyWhenAllLocked) {
  for (TokenId base : {0, 100, 200, 300}) ASSERT_TRUE(cache_.close(prefill(cache_, tenant_, run(base, 32)).seq));
  // 4 x 8 pages cached (idle); the pool of 32 is full.
  EXPECT_EQ(cache_.stats().pool.free_pages, 0);
  std::vector<EvictionEvent> events;
  cache_.set_eviction_listener([&](const EvictionEvent& e) { events.push_back(e); });
  SeqId s = *cache_.open_sequence(tenant_);
  ASSERT_TRUE(cache_.reserve(s, 9));  // 3 pages: the tail of the oldest prompt
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].end_token, 32u);
  EXPECT_EQ(events[2].end_token, 24u);
  EXPECT_TRUE(events[0].freed);
  EXPECT_EQ(*cache_.match(*cache_.open_sequence(tenant_), run(0, 33), 32), 20u);
  // Lock everything else, then ask for more than the free pages: nothing changes.
  std::vector<SeqId> holders;
  for (TokenId base : {100, 200, 300}) {
    holders.push_back(*cache_.open_sequence(tenant_));
    EXPECT_EQ(*cache_.match(holders.back(), run(base, 33), 32), 32u);
  }
  PrefixCacheStats before = cache_.stats();
  Pages table_before = table(cache_, s);
  auto r = cache_.reserve(s, 40);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::out_of_memory);
  EXPECT_NE(r.error().message.find("held by live sequences"), std::string::npos) << r.error().message;
  EXPECT_EQ(table(cache_, s), table_before);
  EXPECT_EQ(cache_.stats().pool.used_pages, before.pool.used_pages);
  EXPECT_EQ(cache_.stats().total.evicted_pages, before.total.evicted_pages);
  ASSERT_TRUE(cache_.close(holders[0]));
  EXPECT_TRUE(cache_.reserve(s, 40));  // now the unlocked prompt can go
}

TEST_F(PrefixCacheTest, RequestLargerThanPoolFails) {
  SeqId s = *cache_.open_sequence(tenant_);
  auto r = cache_.reserve(s, 33 * kPageSize);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::out_of_memory);
  EXPECT_TRUE(cache_.page_table(s).empty());
}

TEST_F(PrefixCacheTest, EvictFreesPagesInLruOrderAndZeroIsNoOp) {
  Prefilled a = prefill(cache_, tenant_, run(0, 9));
  Prefilled b = prefill(cache_, tenant_, run(100, 9));
  cache_.close(a.seq);
  cache_.close(b.seq);
  EXPECT_EQ(cache_.evict(0), 0u);
  EXPECT_EQ(cache_.stats().pool.used_pages, 4);
  std::vector<PageId> order;
  cache_.set_eviction_listener([&](const EvictionEvent& e) { order.push_back(e.page); });
  EXPECT_EQ(cache_.evict(3), 3u);
  EXPECT_EQ(order, (Pages{1, 0, 4}));
  EXPECT_EQ(cache_.evict(100), 1u);
}

TEST_F(PrefixCacheTest, PinKeepsPrefixUntilUnpinned) {
  Tokens prefix = run(0, 8);
  cache_.close(prefill(cache_, tenant_, cat(prefix, {1})).seq);
  auto pin = cache_.pin(tenant_, prefix);
  ASSERT_TRUE(pin);
  EXPECT_EQ(cache_.stats().pinned_pages, 2u);
  EXPECT_EQ(cache_.evict(10), 0u);
  EXPECT_EQ(cache_.pin(tenant_, run(500, 8)).error().code, ErrorCode::not_found);
  ASSERT_TRUE(cache_.unpin(*pin));
  EXPECT_EQ(cache_.unpin(*pin).error().code, ErrorCode::not_found);
  EXPECT_EQ(cache_.evict(10), 2u);
}

class PrefixCachePinCapTest : public PrefixCacheTest {
 protected:
  PrefixCachePinCapTest() : PrefixCacheTest(32, 3) {}
};

TEST_F(PrefixCachePinCapTest, PinsAreBoundedByMaxPinnedPages) {
  cache_.close(prefill(cache_, tenant_, run(0, 9)).seq);
  cache_.close(prefill(cache_, tenant_, run(100, 9)).seq);
  ASSERT_TRUE(cache_.pin(tenant_, run(0, 8)));
  auto over = cache_.pin(tenant_, run(100, 8));
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().code, ErrorCode::out_of_memory);
  EXPECT_TRUE(cache_.pin(tenant_, run(100, 4)));  // 1 page still fits
}

TEST_F(PrefixCacheTest, StatsCountTokens) {
  Prefilled a = prefill(cache_, tenant_, run(0, 10));  // miss 10, insert 8
  prefill(cache_, tenant_, run(0, 10));                // hit 8, miss 2
  cache_.close(a.seq);
  TenantStats t = *cache_.tenant_stats(tenant_);
  EXPECT_EQ(t.lookups, 2u);
  EXPECT_EQ(t.hit_tokens, 8u);
  EXPECT_EQ(t.miss_tokens, 12u);
  EXPECT_EQ(t.inserted_tokens, 8u);
  EXPECT_EQ(t.tree_pages, 2u);
  EXPECT_EQ(t.private_pages, 1u);
  EXPECT_EQ(t.num_sequences, 1);
  EXPECT_EQ(cache_.stats().total.hit_tokens, 8u);
}

TEST_F(PrefixCacheTest, TreeSummaryIsBreadthFirstAndBounded) {
  Tokens prefix = run(0, 8);
  cache_.close(prefill(cache_, tenant_, cat(prefix, run(100, 5))).seq);
  cache_.close(prefill(cache_, tenant_, cat(prefix, run(200, 5))).seq);
  auto nodes = *cache_.tree_summary(tenant_, 10);
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].parent_id, 0u);
  EXPECT_EQ(nodes[0].num_tokens, 8u);
  EXPECT_EQ(nodes[0].depth_tokens, 8u);
  EXPECT_EQ(nodes[0].first_tokens, run(0, 8));
  EXPECT_EQ(nodes[0].hit_count, 1u);  // the second prefill matched through it
  EXPECT_EQ(nodes[1].parent_id, nodes[0].id);
  EXPECT_EQ(nodes[1].first_tokens, run(100, 4));
  EXPECT_EQ(nodes[1].depth_tokens, 12u);
  EXPECT_EQ(nodes[2].first_tokens, run(200, 4));
  EXPECT_FALSE(nodes[2].shared_namespace);
  EXPECT_EQ(cache_.tree_summary(tenant_, 2)->size(), 2u);
}

TEST_F(PrefixCacheTest, InvariantCheckCatchesAStrayReference) {
  Prefilled p = prefill(cache_, tenant_, run(0, 9));
  cache_.pool().ref(0);
  EXPECT_NE(cache_.check_invariants().find("page 0: refcount 3 but 2 holders"), std::string::npos)
      << cache_.check_invariants();
  cache_.pool().unref(0);
  cache_.close(p.seq);
}

TEST_F(PrefixCacheTest, UnknownIdsAreErrors) {
  EXPECT_EQ(cache_.open_sequence(7).error().code, ErrorCode::not_found);
  EXPECT_EQ(cache_.match(99, run(0, 4), 4).error().code, ErrorCode::not_found);
  EXPECT_EQ(cache_.reserve(99, 4).error().code, ErrorCode::not_found);
  EXPECT_EQ(cache_.commit(99, run(0, 4)).error().code, ErrorCode::not_found);
  EXPECT_EQ(cache_.sequence_info(99).error().code, ErrorCode::not_found);
  EXPECT_FALSE(cache_.tenant_stats(7));
  EXPECT_FALSE(cache_.tree_summary(7, 4));
}

}  // namespace
}  // namespace arbor::cache

// Tenant isolation (KV rules 4, 5), publishing, quotas: every miss is paired with a hit.
#include <gtest/gtest.h>

#include "cache/prefix_cache.hpp"
#include "cache_test_util.hpp"

namespace arbor::cache {
namespace {

using namespace arbor::cache::testing;

class TenantTest : public ::testing::Test {
 protected:
  TenantTest() : cache_(kGeom, PrefixCacheConfig{32, EvictionPolicyKind::lru, 0, "m"}, alloc_) {}
  void TearDown() override { EXPECT_EQ(cache_.check_invariants(), ""); }
  std::size_t hit(TenantId tenant, const Tokens& prompt) {
    SeqId s = *cache_.open_sequence(tenant);
    std::size_t n = *cache_.match(s, prompt, prompt.size() - 1);
    EXPECT_TRUE(cache_.close(s));
    return n;
  }

  HostPageAllocator alloc_;
  PrefixCache cache_;
};

TEST_F(TenantTest, SameTenantHitsOtherTenantMisses) {
  TenantId a = *cache_.add_tenant("a"), b = *cache_.add_tenant("b");
  Tokens prompt = run(0, 13);
  cache_.close(prefill(cache_, a, prompt).seq);
  EXPECT_EQ(hit(a, prompt), 12u);
  EXPECT_EQ(hit(b, prompt), 0u);
  // b computing the same ids gets its own pages, never a's.
  Prefilled pb = prefill(cache_, b, prompt);
  EXPECT_EQ(table(cache_, pb.seq), (Pages{3, 4, 5, 6}));  // a holds 0 1 2; 3 was a's freed tail
  EXPECT_EQ(hit(a, prompt), 12u);
  auto summary = *cache_.tree_summary(b, 10);
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_EQ(summary[0].lock_count, 1);
}

TEST_F(TenantTest, PublishedPrefixHitsOnlyOptedInTenants) {
  TenantId owner = *cache_.add_tenant("owner");
  TenantId reader = *cache_.add_tenant("reader", {.read_shared = true});
  TenantId outsider = *cache_.add_tenant("outsider");
  Tokens shared = run(0, 8), task = run(500, 5);
  cache_.close(prefill(cache_, owner, cat(shared, task)).seq);
  EXPECT_EQ(hit(reader, cat(shared, task)), 0u);  // not published yet
  EXPECT_EQ(cache_.publish(owner, shared), 8u);
  EXPECT_EQ(hit(reader, cat(shared, run(900, 5))), 8u);
  EXPECT_EQ(hit(outsider, cat(shared, run(900, 5))), 0u);
  EXPECT_EQ(hit(owner, cat(shared, task)), 12u);  // the owner still has its longer path
  // The reader sees only what was published, not the owner's private suffix.
  EXPECT_EQ(hit(reader, cat(shared, task)), 8u);
  EXPECT_EQ(cache_.pool().refcount(0), 2);  // owner's tree + shared tree, same page
  EXPECT_EQ(cache_.publish(outsider, shared).error().code, ErrorCode::not_found);
  auto summary = *cache_.tree_summary(reader, 10);
  ASSERT_EQ(summary.size(), 1u);
  EXPECT_TRUE(summary[0].shared_namespace);
}

TEST_F(TenantTest, ReaderGetsTheLongerOfOwnAndShared) {
  TenantId owner = *cache_.add_tenant("owner");
  TenantId reader = *cache_.add_tenant("reader", {.read_shared = true});
  Tokens prompt = run(0, 17);
  cache_.close(prefill(cache_, owner, prompt).seq);
  cache_.publish(owner, run(0, 8));
  cache_.close(prefill(cache_, reader, run(0, 13)).seq);  // own: 12 tokens, computed from shared 8
  EXPECT_EQ(hit(reader, prompt), 12u);
  cache_.publish(owner, prompt);
  EXPECT_EQ(hit(reader, prompt), 16u);
  // The reader's own tree took the shared pages for the first 8 tokens.
  SeqId s = *cache_.open_sequence(reader);
  cache_.match(s, prompt, 12);
  Pages t = table(cache_, s);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(Pages(t.begin(), t.begin() + 2), (Pages{0, 1}));
  cache_.close(s);
}

TEST_F(TenantTest, CommitAfterSharedMatchMovesLockToOwnTree) {
  TenantId owner = *cache_.add_tenant("owner");
  TenantId reader = *cache_.add_tenant("reader", {.read_shared = true});
  Tokens shared = run(0, 8);
  cache_.close(prefill(cache_, owner, cat(shared, {1})).seq);
  cache_.publish(owner, shared);
  Prefilled p = prefill(cache_, reader, cat(shared, run(100, 5)));
  EXPECT_EQ(p.matched, 8u);
  EXPECT_EQ(table(cache_, p.seq)[0], 0);
  EXPECT_EQ(cache_.tenant_stats(reader)->tree_pages, 3u);
  EXPECT_EQ(cache_.pool().refcount(0), 4);  // owner tree, shared tree, reader tree, sequence
}

TEST_F(TenantTest, OverQuotaTenantEvictsItsOwnPagesFirst) {
  TenantId a = *cache_.add_tenant("a");
  TenantId q = *cache_.add_tenant("q", {.quota_pages = 6});
  cache_.close(prefill(cache_, a, run(0, 9)).seq);  // a's pages are the oldest
  cache_.close(prefill(cache_, q, run(100, 9)).seq);
  cache_.close(prefill(cache_, q, run(200, 9)).seq);
  EXPECT_EQ(cache_.tenant_stats(q)->used_pages, 4u);
  std::vector<EvictionEvent> events;
  cache_.set_eviction_listener([&](const EvictionEvent& e) { events.push_back(e); });
  SeqId s = *cache_.open_sequence(q);
  ASSERT_TRUE(cache_.reserve(s, 16));  // 4 pages: 2 over quota, taken from q's oldest
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].tenant, q);
  EXPECT_EQ(events[1].tenant, q);
  EXPECT_EQ(hit(a, run(0, 9)), 8u);
  EXPECT_EQ(cache_.tenant_stats(q)->used_pages, 6u);
  EXPECT_EQ(cache_.tenant_stats(q)->evicted_pages, 2u);
  EXPECT_EQ(cache_.tenant_stats(a)->evicted_pages, 0u);
}

TEST_F(TenantTest, QuotaFailureIsClearAndNeverTouchesOtherTenantsLocks) {
  TenantId a = *cache_.add_tenant("a");
  TenantId q = *cache_.add_tenant("q", {.quota_pages = 4});
  Prefilled held = prefill(cache_, a, run(0, 9));  // a keeps its pages locked
  Prefilled mine = prefill(cache_, q, run(100, 9));  // 3 of q's 4 pages, locked
  SeqId s = *cache_.open_sequence(q);
  auto r = cache_.reserve(s, 8);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::out_of_memory);
  EXPECT_NE(r.error().message.find("tenant 'q'"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("quota"), std::string::npos);
  EXPECT_TRUE(cache_.page_table(s).empty());
  EXPECT_EQ(cache_.pool().refcount(table(cache_, held.seq)[0]), 2);
  EXPECT_TRUE(cache_.reserve(s, 4));  // one page fits the quota
  cache_.close(mine.seq);
  EXPECT_TRUE(cache_.reserve(s, 8));  // now q's own cached pages can go
  EXPECT_EQ(cache_.tenant_stats(a)->evicted_pages, 0u);
}

TEST_F(TenantTest, GlobalLruCrossesNamespaces) {
  TenantId a = *cache_.add_tenant("a"), b = *cache_.add_tenant("b");
  cache_.close(prefill(cache_, a, run(0, 9)).seq);
  cache_.close(prefill(cache_, b, run(0, 9)).seq);
  cache_.close(prefill(cache_, a, run(100, 9)).seq);
  std::vector<EvictionEvent> events;
  cache_.set_eviction_listener([&](const EvictionEvent& e) { events.push_back(e); });
  EXPECT_EQ(cache_.evict(4), 4u);
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].tenant, a);
  EXPECT_EQ(events[1].tenant, a);
  EXPECT_EQ(events[2].tenant, b);
  EXPECT_EQ(events[3].tenant, b);
  EXPECT_EQ(hit(a, run(100, 9)), 8u);
}

}  // namespace
}  // namespace arbor::cache

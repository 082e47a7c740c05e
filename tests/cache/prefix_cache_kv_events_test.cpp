// PrefixCache's KV events against keys computed independently from the token ids
// (cache/page_key.hpp's page_keys on the prompt).
#include <gtest/gtest.h>

#include <algorithm>

#include "cache/page_key.hpp"
#include "cache/prefix_cache.hpp"
#include "cache_test_util.hpp"

namespace arbor::cache {
namespace {

using namespace arbor::cache::testing;
using Keys = std::vector<std::uint64_t>;

class PrefixCacheKvEvents : public ::testing::Test {
 protected:
  PrefixCacheKvEvents() : cache_(kGeom, PrefixCacheConfig{16, EvictionPolicyKind::lru, 0, "m"}, alloc_) {
    a_ = *cache_.add_tenant("a");
    b_ = *cache_.add_tenant("b");
    cache_.set_kv_event_listener([this](const KvEvent& e) { events_.push_back(e); });
  }
  void TearDown() override { EXPECT_EQ(cache_.check_invariants(), ""); }

  HostPageAllocator alloc_;
  PrefixCache cache_;
  TenantId a_ = 0, b_ = 0;
  std::vector<KvEvent> events_;
};

TEST_F(PrefixCacheKvEvents, StoredCarriesTheChainKeysParentAndTokens) {
  const Tokens prompt = run(0, 10);  // two full pages and a private tail
  const Keys want = page_keys("a", prompt, kPageSize);
  ASSERT_EQ(want.size(), 2u);
  cache_.close(prefill(cache_, a_, prompt).seq);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, KvEvent::Kind::stored);
  EXPECT_EQ(events_[0].tenant, "a");
  EXPECT_EQ(events_[0].keys, want);
  EXPECT_FALSE(events_[0].parent);
  EXPECT_EQ(events_[0].tokens, Tokens(prompt.begin(), prompt.begin() + 8));
  EXPECT_EQ(events_[0].page_size, std::size_t(kPageSize));

  // A longer prompt with the same start: only the new page, chained to the old one.
  const Tokens longer = run(0, 13);
  cache_.close(prefill(cache_, a_, longer).seq);
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[1].keys, Keys{page_keys("a", longer, kPageSize)[2]});
  EXPECT_EQ(events_[1].parent, want[1]);
  EXPECT_EQ(events_[1].tokens, Tokens(longer.begin() + 8, longer.begin() + 12));

  // The same prompt again adds no page: no event.
  cache_.close(prefill(cache_, a_, prompt).seq);
  EXPECT_EQ(events_.size(), 2u);
}

TEST_F(PrefixCacheKvEvents, EvictionRemovesExactlyTheStoredKeysLeafFirst) {
  const Tokens prompt = run(0, 12);
  const Keys want = page_keys("a", prompt, kPageSize);
  cache_.close(prefill(cache_, a_, prompt).seq);
  events_.clear();
  EXPECT_EQ(cache_.evict(2), 2u);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].kind, KvEvent::Kind::removed);
  EXPECT_EQ(events_[0].tenant, "a");
  EXPECT_EQ(events_[0].keys, (Keys{want[2], want[1]}));
  EXPECT_EQ(cache_.evict(16), 1u);
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[1].keys, Keys{want[0]});
  // Stored again after eviction: the same keys come back.
  cache_.close(prefill(cache_, a_, prompt).seq);
  ASSERT_EQ(events_.size(), 3u);
  EXPECT_EQ(events_[2].keys, want);
}

TEST_F(PrefixCacheKvEvents, PoolPressureEvictsTheOldestPromptsKeys) {
  // 16 pages: four 4-page prompts fill the pool; the fifth evicts the oldest's pages.
  std::vector<Keys> stored;
  for (TokenId base : {0, 100, 200, 300}) {
    const Tokens p = run(base, 16);
    cache_.close(prefill(cache_, a_, p).seq);
    stored.push_back(page_keys("a", p, kPageSize));
  }
  events_.clear();
  const Tokens fifth = run(400, 9);  // 3 pages
  cache_.close(prefill(cache_, a_, fifth).seq);
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[0].kind, KvEvent::Kind::removed);
  EXPECT_EQ(events_[0].keys, (Keys{stored[0][3], stored[0][2], stored[0][1]}));
  EXPECT_EQ(events_[1].kind, KvEvent::Kind::stored);
  EXPECT_EQ(events_[1].keys, page_keys("a", fifth, kPageSize));
}

TEST_F(PrefixCacheKvEvents, EachEventIsOneTenantsAndTenantsNeverShareKeys) {
  const Tokens prompt = run(0, 8);
  cache_.close(prefill(cache_, a_, prompt).seq);
  cache_.close(prefill(cache_, b_, prompt).seq);
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[0].tenant, "a");
  EXPECT_EQ(events_[1].tenant, "b");
  EXPECT_EQ(events_[0].keys, page_keys("a", prompt, kPageSize));
  EXPECT_EQ(events_[1].keys, page_keys("b", prompt, kPageSize));
  for (auto k : events_[0].keys) EXPECT_EQ(std::count(events_[1].keys.begin(), events_[1].keys.end(), k), 0);
  events_.clear();
  cache_.evict(16);
  ASSERT_EQ(events_.size(), 2u);  // one removal per namespace
  for (const auto& e : events_) {
    EXPECT_EQ(e.kind, KvEvent::Kind::removed);
    Keys sorted = e.keys;
    std::sort(sorted.begin(), sorted.end());
    Keys want = page_keys(e.tenant, prompt, kPageSize);
    std::sort(want.begin(), want.end());
    EXPECT_EQ(sorted, want) << e.tenant;
  }
}

TEST_F(PrefixCacheKvEvents, PublishStoresInTheSharedNamespace) {
  const Tokens prompt = run(0, 8);
  cache_.close(prefill(cache_, a_, prompt).seq);
  events_.clear();
  EXPECT_EQ(*cache_.publish(a_, prompt), 8u);
  ASSERT_EQ(events_.size(), 1u);
  EXPECT_EQ(events_[0].tenant, "");
  EXPECT_EQ(events_[0].keys, page_keys("", prompt, kPageSize));
}

}  // namespace
}  // namespace arbor::cache

#include "cache/eviction_policy.hpp"

#include <gtest/gtest.h>

namespace arbor::cache {
namespace {

TEST(EvictionPolicy, RanksByKind) {
  const NodeAccess access{.last_access = 7, .hit_count = 3, .priority = -2};
  EXPECT_EQ(make_eviction_policy(EvictionPolicyKind::lru)->rank(access), 0);
  EXPECT_EQ(make_eviction_policy(EvictionPolicyKind::lfu)->rank(access), 3);
  EXPECT_EQ(make_eviction_policy(EvictionPolicyKind::priority)->rank(access), -2);
  EXPECT_EQ(make_eviction_policy(EvictionPolicyKind::lfu)->name(), "lfu");
  EXPECT_EQ(make_eviction_policy(EvictionPolicyKind::priority)->kind(), EvictionPolicyKind::priority);
}

TEST(LogicalClock, IsMonotonic) {
  LogicalClock clock;
  EXPECT_EQ(clock.tick(), 1u);
  EXPECT_EQ(clock.tick(), 2u);
  EXPECT_EQ(clock.now, 2u);
}

}  // namespace
}  // namespace arbor::cache

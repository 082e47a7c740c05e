// KV rule 8 (bytes per token, per layer and KV head storage) and rule 9 (position t in
// page t / P at slot t % P) as KvGeometry computes them.
#include "cache/kv_geometry.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace arbor::cache {
namespace {

TEST(KvGeometry, SmolLm2BytesPerTokenAndPage) {
  const KvGeometry g{30, 3, 64, 16};  // SmolLM2-135M: 30 layers, 3 KV heads, head_dim 64
  EXPECT_EQ(g.bytes_per_token(), 2u * 30 * 3 * 64 * 2);  // 23,040: K and V, f16
  EXPECT_EQ(g.bytes_per_token(), 23040u);
  EXPECT_EQ(g.bytes_per_page(), 23040u * 16);
  EXPECT_EQ(g.pages_for(0), 0);
  EXPECT_EQ(g.pages_for(1), 1);
  EXPECT_EQ(g.pages_for(16), 1);
  EXPECT_EQ(g.pages_for(17), 2);  // waste per sequence is at most P - 1 slots
}

// Every (layer, K/V, head, slot) row has its own place and together they tile the page
// exactly: layer l's K is never layer l''s, and KV heads are stored once each.
TEST(KvGeometry, RowsTileThePageWithoutOverlap) {
  const KvGeometry g{3, 2, 8, 4};
  std::vector<int> owner(g.elements_per_page(), 0);
  for (int l = 0; l < g.num_layers; ++l)
    for (KvKind kind : {KvKind::key, KvKind::value})
      for (int h = 0; h < g.num_kv_heads; ++h)
        for (int s = 0; s < g.page_size; ++s) {
          const std::size_t at = g.offset(l, kind, h, s);
          ASSERT_LE(at + std::size_t(g.head_dim), owner.size());
          for (int d = 0; d < g.head_dim; ++d) ++owner[at + std::size_t(d)];
        }
  for (int count : owner) ASSERT_EQ(count, 1);
  // One layer's K block is [kv_head][slot][head_dim], contiguous (what attention reads).
  EXPECT_EQ(g.offset(1, KvKind::key, 1, 0) - g.offset(1, KvKind::key, 0, 0), std::size_t(g.page_size * g.head_dim));
  EXPECT_EQ(g.offset(1, KvKind::key, 0, 1) - g.offset(1, KvKind::key, 0, 0), std::size_t(g.head_dim));
}

}  // namespace
}  // namespace arbor::cache

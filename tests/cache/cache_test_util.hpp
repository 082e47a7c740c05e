// Helpers shared by the PrefixCache tests.
#pragma once

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "cache/prefix_cache.hpp"

namespace arbor::cache::testing {

using Tokens = std::vector<TokenId>;
using Pages = std::vector<PageId>;
constexpr int kPageSize = 4;
inline const KvGeometry kGeom{.num_layers = 1, .num_kv_heads = 1, .head_dim = 4, .page_size = kPageSize};

inline Tokens run(TokenId first, std::size_t n) {
  Tokens t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}
inline Tokens cat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
inline Pages table(const PrefixCache& cache, SeqId seq) {
  auto span = cache.page_table(seq);
  return Pages(span.begin(), span.end());
}

// The scheduler's prefill: open, match all but the last token, reserve, commit.
// Returns the sequence and how many tokens matched.
struct Prefilled {
  SeqId seq = 0;
  std::size_t matched = 0;
};
inline Prefilled prefill(PrefixCache& cache, TenantId tenant, const Tokens& prompt) {
  Prefilled p;
  p.seq = *cache.open_sequence(tenant);
  p.matched = *cache.match(p.seq, prompt, prompt.size() - 1);
  EXPECT_TRUE(cache.reserve(p.seq, prompt.size()));
  EXPECT_TRUE(cache.commit(p.seq, prompt));
  EXPECT_EQ(cache.check_invariants(), "");
  return p;
}

}  // namespace arbor::cache::testing

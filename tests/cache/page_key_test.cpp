#include "cache/page_key.hpp"

#include <gtest/gtest.h>

namespace arbor::cache {
namespace {

// Values from an independent implementation of the definition in cache/page_key.hpp
// (a few lines of Python): an external scheduler recomputing keys gets these.
TEST(PageKey, MatchesTheDocumentedDefinition) {
  EXPECT_EQ(page_key_seed(""), 0xc3817c016ba4ff30ull);
  EXPECT_EQ(page_key_seed("a"), 0xc0fc99fea7ab959cull);
  const std::vector<TokenId> ten{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(page_keys("a", ten, 4), (std::vector<PageKey>{0x7682412ae29cfc9dull, 0x118b7bc6b40e3c70ull}));
  const std::vector<TokenId> odd{1, -1, 70000, 5};
  EXPECT_EQ(page_keys("default", odd, 2), (std::vector<PageKey>{0x5a7a3b78b5195c25ull, 0x978afebc1409f4d2ull}));
}

TEST(PageKey, ChainsPageByPageAndSeparatesTenants) {
  const std::vector<TokenId> ids{5, 6, 7, 8, 9, 10};
  const auto keys = page_keys("t", ids, 2);
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0], next_page_key(page_key_seed("t"), std::span(ids).first(2)));
  EXPECT_EQ(keys[2], next_page_key(keys[1], std::span(ids).subspan(4, 2)));
  EXPECT_NE(page_keys("u", ids, 2)[0], keys[0]);
  EXPECT_TRUE(page_keys("t", ids, 0).empty());
  EXPECT_EQ(page_keys("t", std::span(ids).first(5), 2).size(), 2u);  // the partial page has no key
}

}  // namespace
}  // namespace arbor::cache

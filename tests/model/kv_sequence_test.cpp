// KvSequence's page bookkeeping without an engine: a reader borrowing an owner's full
// pages holds a reference on each and never touches their protection, so releasing or
// truncating it leaves the owner's pages as they were, and nothing leaks.
#include "model/kv_sequence.hpp"

#include <gtest/gtest.h>

#include "cache/page_allocator.hpp"

namespace arbor::model {
namespace {

TEST(KvSequence, BorrowedPagesAreReferencedNotProtectedAndGoBackOnRelease) {
  cache::HostPageAllocator allocator;
  cache::PagePool pool({.num_layers = 1, .num_kv_heads = 1, .head_dim = 8, .page_size = 16}, 16, allocator);
  KvSequence owner;
  ASSERT_TRUE(reserve_pages(owner, pool, 40));  // 3 pages
  for (int t = 0; t < 40; ++t) owner.tokens.push_back(t);

  KvSequence reader;
  borrow_prefix(reader, owner, 2, pool);
  EXPECT_EQ(reader.borrowed_pages, 2);
  EXPECT_EQ(reader.tokens, std::vector<TokenId>(owner.tokens.begin(), owner.tokens.begin() + 32));
  ASSERT_TRUE(reserve_pages(reader, pool, 50));  // its own 4th page after the 2 borrowed
  ASSERT_EQ(reader.pages.size(), 4u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(pool.refcount(owner.pages[std::size_t(i)]), 2);
    EXPECT_EQ(pool.protect_count(owner.pages[std::size_t(i)]), 1) << "only the owner protects it";
  }
  EXPECT_EQ(pool.num_used(), 5);

  truncate(reader, pool, 10);  // back into the borrowed part: keeps one borrowed page
  EXPECT_EQ(reader.borrowed_pages, 1);
  EXPECT_EQ(pool.refcount(owner.pages[1]), 1);
  EXPECT_EQ(pool.protect_count(owner.pages[1]), 1);
  EXPECT_EQ(pool.num_used(), 3);

  release(reader, pool);
  EXPECT_EQ(reader.borrowed_pages, 0);
  EXPECT_EQ(pool.refcount(owner.pages[0]), 1);
  EXPECT_EQ(pool.protect_count(owner.pages[0]), 1);
  EXPECT_EQ(pool.num_protected(), 3);
  release(owner, pool);
  EXPECT_EQ(pool.num_used(), 0);
  EXPECT_EQ(pool.num_protected(), 0);
}

}  // namespace
}  // namespace arbor::model

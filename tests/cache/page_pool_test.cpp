#include "cache/page_pool.hpp"

#include <gtest/gtest.h>

#include <cstdint>

namespace arbor::cache {
namespace {

const KvGeometry kGeom{.num_layers = 2, .num_kv_heads = 2, .head_dim = 4, .page_size = 4};

class FailingAllocator final : public PageAllocator {
 public:
  Result<void*> allocate(std::size_t) override { return fail(ErrorCode::out_of_memory, "device is full"); }
  void deallocate(void*, std::size_t) override {}
  std::size_t alignment() const override { return 64; }
  bool host_accessible() const override { return false; }
};

TEST(PagePool, FreshPoolHandsOutPagesInOrder) {
  HostPageAllocator alloc;
  PagePool pool(kGeom, 8, alloc);
  auto pages = pool.allocate(3);
  ASSERT_TRUE(pages);
  EXPECT_EQ(*pages, (std::vector<PageId>{0, 1, 2}));
  EXPECT_EQ(pool.num_free(), 5);
  EXPECT_EQ(pool.num_used(), 3);
  EXPECT_EQ(pool.refcount(1), 1);
}

TEST(PagePool, ExhaustionFailsAsValueAndFreeingMakesRoom) {
  HostPageAllocator alloc;
  PagePool pool(kGeom, 4, alloc);
  EXPECT_FALSE(pool.can_allocate(5));
  auto too_many = pool.allocate(5);
  ASSERT_FALSE(too_many);
  EXPECT_EQ(too_many.error().code, ErrorCode::out_of_memory);
  EXPECT_EQ(pool.num_free(), 4);
  auto all = pool.allocate(4);
  ASSERT_TRUE(all);
  EXPECT_FALSE(pool.can_allocate(1));
  EXPECT_FALSE(pool.allocate(1));
  EXPECT_EQ(pool.num_used(), 4);
  pool.unref(2);
  ASSERT_TRUE(pool.can_allocate(1));
  auto again = pool.allocate(1);
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, std::vector<PageId>{2});
}

TEST(PagePool, PageReturnsToFreeListAtRefcountZero) {
  HostPageAllocator alloc;
  PagePool pool(kGeom, 4, alloc);
  PageId p = (*pool.allocate(1))[0];
  pool.ref(p);
  EXPECT_EQ(pool.refcount(p), 2);
  pool.unref(p);
  EXPECT_EQ(pool.num_free(), 3);
  pool.unref(p);
  EXPECT_EQ(pool.refcount(p), 0);
  EXPECT_EQ(pool.num_free(), 4);
  EXPECT_EQ(pool.free_pages().back(), p);  // LIFO: the next allocation reuses it
}

TEST(PagePool, ProtectCountsSplitUsedIntoIdleAndProtected) {
  HostPageAllocator alloc;
  PagePool pool(kGeom, 4, alloc);
  auto pages = *pool.allocate(2);
  pool.protect(pages[0]);
  pool.protect(pages[0]);
  EXPECT_EQ(pool.num_protected(), 1);
  EXPECT_EQ(pool.num_idle(), 1);
  pool.unprotect(pages[0]);
  EXPECT_EQ(pool.num_protected(), 1);
  pool.unprotect(pages[0]);
  EXPECT_EQ(pool.num_protected(), 0);
  EXPECT_EQ(pool.num_idle(), 2);
}

TEST(PagePool, PageDataIsAlignedAndLaidOutByGeometry) {
  HostPageAllocator alloc;
  PagePool pool(kGeom, 3, alloc);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pool.page_data(0)) % 64, 0u);
  EXPECT_EQ(pool.page_data(2) - pool.page_data(0), std::ptrdiff_t(2 * kGeom.elements_per_page()));
  // Write each page's id everywhere, then read back: pages do not overlap.
  for (PageId p = 0; p < 3; ++p)
    for (std::size_t i = 0; i < kGeom.elements_per_page(); ++i) pool.page_data(p)[i] = std::uint16_t(p + 1);
  for (PageId p = 0; p < 3; ++p) {
    EXPECT_EQ(pool.page_data(p)[0], p + 1);
    EXPECT_EQ(pool.page_data(p)[kGeom.offset(1, KvKind::value, 1, 3) + 3], p + 1);
  }
}

TEST(PagePool, AllocatorFailureLeavesAnEmptyPoolWithTheReason) {
  FailingAllocator alloc;
  PagePool pool(kGeom, 16, alloc);
  ASSERT_NE(pool.storage_error(), nullptr);
  EXPECT_EQ(pool.storage_error()->message, "device is full");
  EXPECT_EQ(pool.num_pages(), 0);
  EXPECT_FALSE(pool.allocate(1));
}

TEST(HostPageAllocator, AlignsTo64Bytes) {
  HostPageAllocator alloc;
  for (std::size_t bytes : {1u, 63u, 64u, 1000u}) {
    auto p = alloc.allocate(bytes);
    ASSERT_TRUE(p);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(*p) % 64, 0u);
    alloc.deallocate(*p, bytes);
  }
  EXPECT_EQ(*alloc.allocate(0), nullptr);
}

}  // namespace
}  // namespace arbor::cache

#include "cache/page_pool.hpp"

#include <cassert>
#include <string>

namespace arbor::cache {

PagePool::PagePool(KvGeometry geometry, int num_pages, PageAllocator& allocator)
    : geometry_(geometry), allocator_(allocator) {
  assert(num_pages >= 0);
  storage_bytes_ = std::size_t(num_pages) * geometry_.bytes_per_page();
  auto region = allocator_.allocate(storage_bytes_);
  if (!region) {
    storage_error_ = region.error();
    storage_bytes_ = 0;
    return;
  }
  storage_ = static_cast<std::uint16_t*>(*region);
  refcount_.assign(std::size_t(num_pages), 0);
  protect_.assign(std::size_t(num_pages), 0);
  free_list_.reserve(std::size_t(num_pages));
  // Reverse order so that a fresh pool hands out 0, 1, 2, ...
  for (PageId page = num_pages - 1; page >= 0; --page) free_list_.push_back(page);
}

PagePool::~PagePool() {
  if (storage_ != nullptr) allocator_.deallocate(storage_, storage_bytes_);
}

Result<std::vector<PageId>> PagePool::allocate(int n) {
  if (!can_allocate(n)) {
    return fail(ErrorCode::out_of_memory,
                "KV page pool: " + std::to_string(n) + " pages requested, " +
                    std::to_string(num_free()) + " of " + std::to_string(num_pages()) +
                    " free; evict cached pages or enlarge the pool");
  }
  std::vector<PageId> pages(static_cast<std::size_t>(n));
  for (auto& page : pages) {
    page = free_list_.back();
    free_list_.pop_back();
    refcount_[std::size_t(page)] = 1;
  }
  return pages;
}

void PagePool::ref(PageId page) {
  assert(valid(page) && refcount_[std::size_t(page)] > 0 && "ref of a free page");
  ++refcount_[std::size_t(page)];
}

void PagePool::unref(PageId page) {
  auto& count = refcount_[std::size_t(page)];
  assert(valid(page) && count > 0 && "unref of a free page");
  if (--count == 0) {
    assert(protect_[std::size_t(page)] == 0 && "freeing a protected page");
    free_list_.push_back(page);
  }
}

void PagePool::protect(PageId page) {
  assert(valid(page) && refcount_[std::size_t(page)] > 0);
  if (protect_[std::size_t(page)]++ == 0) ++num_protected_;
}

void PagePool::unprotect(PageId page) {
  assert(valid(page) && protect_[std::size_t(page)] > 0);
  if (--protect_[std::size_t(page)] == 0) --num_protected_;
}

std::uint16_t* PagePool::page_data(PageId page) {
  assert(valid(page) && allocator_.host_accessible());
  return storage_ + std::size_t(page) * geometry_.elements_per_page();
}

const std::uint16_t* PagePool::page_data(PageId page) const {
  assert(valid(page) && allocator_.host_accessible());
  return storage_ + std::size_t(page) * geometry_.elements_per_page();
}

}  // namespace arbor::cache

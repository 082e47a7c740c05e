// Fixed pool of KV pages with a free list and per-page counts (KV rule 9).
//
// Single-threaded by contract: one owner (the cache actor) calls it; no locks inside.
//
// Two counts per page:
//  - refcount: how many holders keep the page alive (a radix-tree node that contains
//    it, a sequence whose page table lists it). The page goes back to the free list
//    when the refcount drops to 0.
//  - protect count: how many of those holders forbid reclaiming it (a live sequence,
//    a locked tree path). A used page with protect count 0 is "idle": it is held only
//    by unlocked tree nodes, so eviction can always free it.
// All operations are O(1) per page; allocate(n) is O(n).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "cache/kv_geometry.hpp"
#include "cache/page_allocator.hpp"
#include "common/result.hpp"

namespace arbor::cache {

class PagePool {
 public:
  // Takes storage for `num_pages` pages from `allocator` (which must outlive the pool).
  // If the allocator fails, the pool has no pages and storage_error() says why.
  PagePool(KvGeometry geometry, int num_pages, PageAllocator& allocator);
  ~PagePool();
  PagePool(const PagePool&) = delete;
  PagePool& operator=(const PagePool&) = delete;

  const KvGeometry& geometry() const { return geometry_; }
  int num_pages() const { return int(refcount_.size()); }
  int num_free() const { return int(free_list_.size()); }
  int num_used() const { return num_pages() - num_free(); }
  // Used pages that some holder protects / that only unlocked tree nodes hold.
  int num_protected() const { return num_protected_; }
  int num_idle() const { return num_used() - num_protected_; }
  const Error* storage_error() const { return storage_error_ ? &*storage_error_ : nullptr; }

  bool can_allocate(int n) const { return n >= 0 && n <= num_free(); }
  // n pages, each with refcount 1 and protect count 0; out_of_memory (and no change)
  // when fewer than n are free. Pages come off the free list in LIFO order.
  Result<std::vector<PageId>> allocate(int n);

  void ref(PageId page);
  // Drops one reference; at 0 the page returns to the free list (it must not be protected).
  void unref(PageId page);
  void protect(PageId page);
  void unprotect(PageId page);

  int refcount(PageId page) const { return refcount_[std::size_t(page)]; }
  int protect_count(PageId page) const { return protect_[std::size_t(page)]; }
  bool valid(PageId page) const { return page >= 0 && page < num_pages(); }
  std::span<const PageId> free_pages() const { return free_list_; }

  // f16 storage of a page, laid out as kv_geometry.hpp describes (host allocators only).
  std::uint16_t* page_data(PageId page);
  const std::uint16_t* page_data(PageId page) const;

 private:
  KvGeometry geometry_;
  PageAllocator& allocator_;
  std::uint16_t* storage_ = nullptr;
  std::size_t storage_bytes_ = 0;
  std::vector<std::int32_t> refcount_;
  std::vector<std::int32_t> protect_;
  std::vector<PageId> free_list_;  // stack; a page is on it iff its refcount is 0
  int num_protected_ = 0;          // pages with protect count > 0
  std::optional<Error> storage_error_;
};

}  // namespace arbor::cache

// Where page storage comes from. The page pool asks a PageAllocator for one region
// holding all its pages and never calls malloc itself, so a device allocator (CUDA,
// pinned host memory) can be dropped in later without touching the pool.
#pragma once

#include <cstddef>

#include "common/result.hpp"

namespace arbor::cache {

class PageAllocator {
 public:
  virtual ~PageAllocator() = default;
  // A region of at least `num_bytes`, aligned to `alignment()` bytes; an error value
  // (out_of_memory) when it cannot be had. `num_bytes == 0` returns nullptr.
  virtual Result<void*> allocate(std::size_t num_bytes) = 0;
  // Returns a region from allocate(); `num_bytes` is the size asked for.
  virtual void deallocate(void* region, std::size_t num_bytes) = 0;
  virtual std::size_t alignment() const = 0;
  // True when the CPU can read and write the region (page_data is dereferenceable).
  virtual bool host_accessible() const = 0;
};

// Host memory, 64-byte aligned (a cache line; also the widest AVX-512 load).
class HostPageAllocator final : public PageAllocator {
 public:
  static constexpr std::size_t kAlignment = 64;
  Result<void*> allocate(std::size_t num_bytes) override;
  void deallocate(void* region, std::size_t num_bytes) override;
  std::size_t alignment() const override { return kAlignment; }
  bool host_accessible() const override { return true; }
};

}  // namespace arbor::cache

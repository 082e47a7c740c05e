// The KV page pool's storage on a CUDA device: one cudaMalloc region (never managed
// memory), in the same page layout as the host pool (cache/kv_geometry.hpp), so the
// radix tree, eviction, tenants and pins work unchanged on page ids. The CUDA engine
// addresses pages from region(); the host never dereferences it (host_accessible() is
// false, and PagePool::page_data is not used with it).
#pragma once

#include <cstddef>

#include "cache/page_allocator.hpp"

namespace arbor::model {

class CudaPageAllocator final : public cache::PageAllocator {
 public:
  explicit CudaPageAllocator(int device) : device_(device) {}
  ~CudaPageAllocator() override;

  // One region at a time (one pool per engine): out_of_memory while one is live, or
  // when the device has too little free memory (saying how much it has).
  Result<void*> allocate(std::size_t num_bytes) override;
  void deallocate(void* region, std::size_t num_bytes) override;
  std::size_t alignment() const override { return 256; }  // cudaMalloc's guarantee
  bool host_accessible() const override { return false; }

  // The live region and its size; nullptr and 0 when none.
  void* region() const { return region_; }
  std::size_t region_bytes() const { return region_bytes_; }

 private:
  int device_;
  void* region_ = nullptr;
  std::size_t region_bytes_ = 0;
};

}  // namespace arbor::model

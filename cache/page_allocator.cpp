#include "cache/page_allocator.hpp"

#include <cstdlib>
#include <string>

namespace arbor::cache {

Result<void*> HostPageAllocator::allocate(std::size_t num_bytes) {
  if (num_bytes == 0) return static_cast<void*>(nullptr);
  // aligned_alloc wants a size that is a multiple of the alignment.
  std::size_t rounded = (num_bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* region = std::aligned_alloc(kAlignment, rounded);
  if (region == nullptr) {
    return fail(ErrorCode::out_of_memory,
                "host page allocator: cannot allocate " + std::to_string(rounded) +
                    " bytes for the KV page pool; lower num_pages or the model's context size");
  }
  return region;
}

void HostPageAllocator::deallocate(void* region, std::size_t) { std::free(region); }

}  // namespace arbor::cache

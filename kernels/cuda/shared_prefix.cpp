#include "kernels/cuda/shared_prefix.hpp"

#include <algorithm>

namespace arbor::kernels::cuda {
namespace {

// Leading pages of `r` that the row sees in full: pages 0..k-1 where k * page_size - 1 <= pos.
int visible_pages(const DecodeRowPages& r, int page_size) {
  return std::min(int(r.pages.size()), (r.pos + 1) / page_size);
}

int common_pages(const DecodeRowPages& a, const DecodeRowPages& b, int page_size) {
  const int n = std::min(visible_pages(a, page_size), visible_pages(b, page_size));
  int k = 0;
  while (k < n && a.pages[std::size_t(k)] == b.pages[std::size_t(k)]) ++k;
  return k;
}

}  // namespace

SharedPrefixPlan plan_shared_prefixes(std::span<const DecodeRowPages> rows, int num_rows, int page_size,
                                      int min_pages) {
  SharedPrefixPlan plan;
  plan.row_start.assign(std::size_t(num_rows), 0);
  std::vector<const DecodeRowPages*> sorted;
  for (const DecodeRowPages& r : rows) sorted.push_back(&r);
  std::stable_sort(sorted.begin(), sorted.end(), [](const DecodeRowPages* a, const DecodeRowPages* b) {
    return std::lexicographical_compare(a->pages.begin(), a->pages.end(), b->pages.begin(), b->pages.end());
  });
  // Greedy: a tile grows while its rows keep at least min_pages in common.
  std::size_t i = 0;
  while (i < sorted.size()) {
    std::size_t end = i + 1;
    int shared = visible_pages(*sorted[i], page_size);
    while (end < sorted.size() && end - i < std::size_t(kSharedTileRows)) {
      const int with_next = std::min(shared, common_pages(*sorted[end - 1], *sorted[end], page_size));
      if (with_next < min_pages) break;
      shared = with_next;
      ++end;
    }
    if (end - i >= 2) {
      const int length = shared * page_size;
      for (std::size_t k = 0; k < std::size_t(kSharedTileRows); ++k) {
        const bool in = i + k < end;
        plan.tile_rows.push_back(in ? sorted[i + k]->row : -1);
        if (in) plan.row_start[std::size_t(sorted[i + k]->row)] = length;
      }
      plan.tile_length.push_back(length);
      plan.max_tile_length = std::max(plan.max_tile_length, length);
    }
    i = end;
  }
  return plan;
}

void add_prefill_tiles(SharedPrefixPlan& plan, int first_row, int first_pos, int count) {
  for (int i = 0; i + 1 < count; i += kSharedTileRows) {
    const int rows = std::min(kSharedTileRows, count - i), length = first_pos + i + 1;  // rows >= 2
    for (int k = 0; k < kSharedTileRows; ++k) {
      plan.tile_rows.push_back(k < rows ? first_row + i + k : -1);
      if (k < rows) plan.row_start[std::size_t(first_row + i + k)] = length;
    }
    plan.tile_length.push_back(length);
    plan.max_tile_length = std::max(plan.max_tile_length, length);
  }
}

int max_own_positions(const SharedPrefixPlan& plan, std::span<const std::int32_t> row_pos) {
  int longest = 0;
  for (std::size_t r = 0; r < row_pos.size(); ++r) longest = std::max(longest, row_pos[r] + 1 - plan.row_start[r]);
  return longest;
}

}  // namespace arbor::kernels::cuda

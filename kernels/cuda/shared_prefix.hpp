// Shared-prefix (cascade) planning for decode attention, on the host: which decode rows
// of a step read the same leading KV pages, so that one pass over those pages serves
// them all (kernels/cuda/attention.hpp).
//
// N sub-agents decoding over one SharedPrefix hold the same physical pages at the start
// of their page tables (the radix tree hands every reader the owner's pages). Reading
// them once per tile of up to kSharedTileRows rows instead of once per row divides the
// prefix's K/V traffic by the tile size; each row then reads only its own pages, and the
// two partial softmax states merge exactly (online softmax).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cuda/attention.hpp"

namespace arbor::kernels::cuda {

// One decode row (a sequence with one new token this step): its row index in the batch,
// its position, and its page table (at least position / page_size + 1 pages).
struct DecodeRowPages {
  int row = 0;
  int pos = 0;
  std::span<const std::int32_t> pages;
};

struct SharedPrefixPlan {
  // [num_tiles][kSharedTileRows] row indices, -1 after a tile's last row; a tile has at
  // least 2 rows, all with the same first `tile_length[t]` positions' pages.
  std::vector<std::int32_t> tile_rows;
  std::vector<std::int32_t> tile_length;  // [num_tiles], a whole number of pages
  std::vector<std::int32_t> row_start;    // [num_rows]: the tile's length for a row in one, else 0
  int max_tile_length = 0;
  int num_tiles() const { return int(tile_length.size()); }
};

// Tiles of rows sharing at least `min_pages` leading pages: the rows are sorted by page
// table, so rows with the longest common prefix are neighbours, then cut into tiles of
// at most kSharedTileRows; a tile shares the pages all its rows have in common, and only
// pages every row sees in full (position >= the page's last position). Rows that end up
// alone read everything in their own pass.
SharedPrefixPlan plan_shared_prefixes(std::span<const DecodeRowPages> rows, int num_rows, int page_size,
                                      int min_pages = 1);

}  // namespace arbor::kernels::cuda

// Shared-prefix (cascade) planning for attention, on the host: which rows of a step read
// the same leading positions, so that one pass over those positions' K/V serves them all
// (kernels/cuda/attention.hpp): decode rows of sequences holding the same leading pages,
// and consecutive prefill rows of one sequence.
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
  // least 2 rows, all with the same first `tile_length[t]` positions' pages (read through
  // the first row's page table), each seeing all of them.
  std::vector<std::int32_t> tile_rows;
  std::vector<std::int32_t> tile_length;  // [num_tiles]; a whole number of pages for decode tiles
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

// Adds to `plan` (from plan_shared_prefixes, over every row of the batch) the tiles of a
// prefill run: `count` consecutive rows from batch row `first_row`, of
// one sequence at positions first_pos, first_pos + 1, ... Each kSharedTileRows of them
// share the positions their first row sees (0..its position), read once for the tile:
// each row's own pass then covers at most kSharedTileRows - 1 positions, and a chunk of
// n prefill rows reads its context ~n / kSharedTileRows times instead of n.
void add_prefill_tiles(SharedPrefixPlan& plan, int first_row, int first_pos, int count);

// Max over rows of row_pos + 1 - row_start: the longest own pass (row_pos: each row's
// position, indexed by batch row).
int max_own_positions(const SharedPrefixPlan& plan, std::span<const std::int32_t> row_pos);

}  // namespace arbor::kernels::cuda

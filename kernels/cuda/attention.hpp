// Causal GQA attention of a batch's query rows over paged f16 K/V on a CUDA device:
// the device twin of kernels::cpu::paged_attention (same page layout, same masking).
//
// Each query row has an absolute position and reads every position <= it of its own
// sequence, through that sequence's page table (cached prefix pages, then the pages of
// the new tokens: prefill chunks and decode rows alike). Online softmax (running max m,
// sum l, weighted sum u, rescaled by exp(m_old - m_new)), never a T x T matrix. For
// long contexts the positions of a row are split into chunks processed in parallel
// (flash-decoding); a second kernel merges the chunks' (m, l, u) states.
//
// Shared prefixes (cascade attention): decode rows whose page tables begin with the same
// pages, and runs of consecutive prefill rows of one sequence, may come in tiles
// (kernels/cuda/shared_prefix.hpp). A tile's pass reads the positions its rows share
// once for all of them and leaves one (m, l, u) state per row, head and split of the
// shared part; each row's own pass then covers row_start..row_pos, and the merge takes
// both. Without tiles every row reads its whole context alone.
//
// The shared pass runs on tensor cores (flash attention: a tile's 16 queries against 16
// positions at a time, scores and the weighted V sum as 16x16x16 f16 products summed in
// f32) where the head is a multiple of 16 elements and the pool's rows are 16-byte
// aligned; otherwise on CUDA cores, a warp per 8 rows of the tile.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace arbor::kernels::cuda {

struct PagedAttentionBatch {
  const float* q = nullptr;  // [num_rows][num_q_heads * head_dim], RoPE'd (device)
  float* out = nullptr;      // same shape (device)
  int num_rows = 0;
  const std::int32_t* row_pos = nullptr;    // [num_rows]: the row sees positions 0..row_pos[r]
  const std::int32_t* row_table = nullptr;  // [num_rows]: where the row's page table starts in page_table
  const std::int32_t* page_table = nullptr; // physical page ids, every sequence's table back to back
  const std::uint16_t* kv_base = nullptr;   // the pool: page p at kv_base + p * elements_per_page
  std::int64_t elements_per_page = 0;
  std::int64_t k_offset = 0, v_offset = 0;  // this layer's K and V blocks within a page
  int num_q_heads = 0, num_kv_heads = 0;    // q head h reads kv head h / (num_q_heads / num_kv_heads)
  int head_dim = 0;                         // at most kMaxHeadDim
  int page_size = 0;
  int max_positions = 0;                    // max over rows of row_pos + 1
  int max_own_positions = 0;                // max over rows of row_pos + 1 - row_start (0: max_positions)
  float scale = 0.f;                        // usually 1 / sqrt(head_dim)
  // Shared-prefix tiles (optional; see plan_shared_prefixes): tile t's rows
  // tile_rows[t * kSharedTileRows ...] (-1 past its last) share their first tile_length[t]
  // positions' pages, read through its first row's page table. With tiles, row_start[r]
  // is where row r's own pass begins (its tile's length, or 0).
  int num_tiles = 0;
  int max_tile_length = 0;                  // max over tiles of tile_length
  const std::int32_t* tile_rows = nullptr;
  const std::int32_t* tile_length = nullptr;
  const std::int32_t* row_start = nullptr;
  bool tensor_cores = true;  // the shared pass may run on tensor cores (false: CUDA cores, to compare)
};

inline constexpr int kMaxHeadDim = 256;
inline constexpr int kSharedTileRows = 16;  // rows per shared-prefix tile, at most: one tensor-core tile

// Splits of each row's positions for this batch (its own pass; the shared pass has its
// own), and the scratch the split states of both need. For a bound before the tiles are
// known, give num_tiles 1 and max_tile_length max_positions: no plan needs more.
int attention_splits(const PagedAttentionBatch& batch);
std::size_t attention_scratch_bytes(const PagedAttentionBatch& batch);

// Whether the shared pass of `batch` runs on tensor cores (f16 queries and weights: see
// above) rather than CUDA cores (f32 throughout): allowed by `tensor_cores` and possible.
bool shared_pass_uses_tensor_cores(const PagedAttentionBatch& batch);

// `scratch`: attention_scratch_bytes(batch) bytes of device memory.
void paged_attention(const PagedAttentionBatch& batch, float* scratch, cudaStream_t stream);

}  // namespace arbor::kernels::cuda

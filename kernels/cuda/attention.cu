// Paged attention (see attention.hpp). One warp per (row, query heads of one KV head,
// split): lanes hold interleaved elements of the head (element lane + 32 j, j < kLanes),
// so q.k is a per-lane partial dot and a warp reduction, and the weighted V sum stays in
// registers; the K/V a warp loads serve its 1-4 query heads (GQA).
// The kernels are instantiated for kLanes 2, 4 and 8 (head_dim up to 64, 128, 256) and
// launched with the smallest that holds the head: registers scale with kLanes, so a
// 64-wide head does not pay for 256.
//
// A tile's shared pass: on tensor cores, one block per (tile, query heads of one KV head,
// split) loads 16 positions' K/V at a time into shared memory once for its warps, one
// warp a head, each holding the tile's 16 queries as matrix fragments (S = Q K^T, the
// online softmax of S's rows by lane pairs, O = O * correction + P V); on CUDA cores, the
// row loop above with each K/V element loaded once for 8 rows of the tile.
//
// Scratch: per (row, head), `slots` states of head_dim unnormalised sums then m and l:
// first the row's own splits, then the shared part's splits (written only for rows in a
// tile; the merge reads them only for those rows). With one slot (one split, no tiles:
// decode over a short context) the split kernel writes the output and nothing merges.
#include <mma.h>

#include <algorithm>
#include <cstdint>
#include <utility>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/device.hpp"
#include "kernels/cuda/quant.cuh"

namespace arbor::kernels::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kMinPositionsPerSplit = 256;
constexpr std::int64_t kTargetItems = std::int64_t(1) << 18;  // warps worth launching at most, roughly
constexpr int kCoreTileRows = 8;  // rows of a tile per warp of the CUDA-core shared pass
constexpr int kMmaRows = 16;      // the tensor-core tile: 16 queries x 16 positions x 16 elements
static_assert(kSharedTileRows == kMmaRows && kSharedTileRows % kCoreTileRows == 0);

struct Split {
  int num_splits, positions_per_split;
};

// Splits of `positions` positions among `items` warps' worth of (row or tile, head).
Split split_positions(std::int64_t items, int positions) {
  if (positions <= 0) return {0, 1};
  items = std::max<std::int64_t>(1, items);
  const int max_splits = std::max(1, (positions + kMinPositionsPerSplit - 1) / kMinPositionsPerSplit);
  const int wanted = int(std::clamp<std::int64_t>(kTargetItems / items, 1, max_splits));
  const int per_split = (positions + wanted - 1) / wanted;
  return {(positions + per_split - 1) / per_split, per_split};
}

struct Plan {
  Split own, shared;
  __host__ __device__ int slots() const { return own.num_splits + shared.num_splits; }
};

Plan plan_of(const PagedAttentionBatch& b) {
  const int own_positions = b.max_own_positions > 0 ? b.max_own_positions : b.max_positions;
  Plan p{split_positions(std::int64_t(b.num_rows) * b.num_q_heads, own_positions), {0, 1}};
  // A tile's warp does a tile's worth of rows: fewer of them are enough.
  if (b.num_tiles > 0)
    p.shared = split_positions(std::int64_t(b.num_tiles) * b.num_q_heads * kSharedTileRows, b.max_tile_length);
  return p;
}

// The online softmax of one query row over positions, as (m, l, acc).
template <int kLanes>
struct RowState {
  float m, l, acc[kLanes];
  __device__ void reset() {
    m = -INFINITY;
    l = 0.f;
#pragma unroll
    for (int j = 0; j < kLanes; ++j) acc[j] = 0.f;
  }
  __device__ void add(float score, const float (&v)[kLanes]) {
    const float m_new = fmaxf(m, score);
    const float correction = expf(m - m_new);  // 0 on the first position (m = -inf)
    const float p = expf(score - m_new);
    l = l * correction + p;
#pragma unroll
    for (int j = 0; j < kLanes; ++j) acc[j] = fmaf(p, v[j], acc[j] * correction);
    m = m_new;
  }
  __device__ void store(float* state, int lane, int head_dim) const {
#pragma unroll
    for (int j = 0; j < kLanes; ++j) {
      const int d = lane + 32 * j;
      if (d < head_dim) state[d] = acc[j];
    }
    if (lane == 0) {
      state[head_dim] = m;  // -inf (and l = 0) for a split with no position
      state[head_dim + 1] = l;
    }
  }
  // The normalised output (what the merge computes from a single state).
  __device__ void store_output(float* out, int lane, int head_dim) const {
#pragma unroll
    for (int j = 0; j < kLanes; ++j) {
      const int d = lane + 32 * j;
      if (d < head_dim) out[d] = acc[j] / l;
    }
  }
};

template <int kLanes>
__device__ void load_q(const PagedAttentionBatch& b, int r, int h, int lane, float (&q)[kLanes]) {
  const float* qr = b.q + (std::int64_t(r) * b.num_q_heads + h) * b.head_dim;
#pragma unroll
  for (int j = 0; j < kLanes; ++j) {
    const int d = lane + 32 * j;
    q[j] = d < b.head_dim ? qr[d] : 0.f;
  }
}

// This lane's elements of position t's K and V (kv head `kv_head`) through `table`.
template <int kLanes>
__device__ void load_kv(const PagedAttentionBatch& b, const std::int32_t* table, int kv_head, int t, int lane,
                        float (&k)[kLanes], float (&v)[kLanes]) {
  const std::uint16_t* page = b.kv_base + std::int64_t(table[t / b.page_size]) * b.elements_per_page;
  const std::int64_t row_off = (std::int64_t(kv_head) * b.page_size + t % b.page_size) * b.head_dim;
#pragma unroll
  for (int j = 0; j < kLanes; ++j) {
    const int d = lane + 32 * j;
    const bool in = d < b.head_dim;
    k[j] = in ? __half2float(__ushort_as_half(page[b.k_offset + row_off + d])) : 0.f;
    v[j] = in ? __half2float(__ushort_as_half(page[b.v_offset + row_off + d])) : 0.f;
  }
}

template <int kLanes>
__device__ float score_of(const float (&q)[kLanes], const float (&k)[kLanes], float scale) {
  float dot = 0.f;
#pragma unroll
  for (int j = 0; j < kLanes; ++j) dot = fmaf(q[j], k[j], dot);
  return warp_sum(dot) * scale;
}

__device__ float* state_at(float* scratch, const PagedAttentionBatch& b, int r, int h, int slot, int slots) {
  return scratch + ((std::int64_t(r) * b.num_q_heads + h) * slots + slot) * (b.head_dim + 2);
}

// The (row or tile, head, split) of warp `item`, splits innermost.
struct WarpItem {
  int outer, head, split;
};
__device__ WarpItem warp_item(std::int64_t item, int num_heads, int num_splits) {
  return {int(item / (std::int64_t(num_splits) * num_heads)), int((item / num_splits) % num_heads),
          int(item % num_splits)};
}

// A row's own pass: positions row_start..row_pos, one split per warp (split s covers
// row_start + s * positions_per_split onwards), for kGroup query heads that read the same
// KV head (GQA): each K/V element is loaded once for all of them, and their kGroup score
// reductions are independent, so their shuffles overlap.
template <int kLanes, int kGroup>
__global__ void attention_split_kernel(PagedAttentionBatch b, Plan plan, float* scratch) {
  const std::int64_t item = std::int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const Split split = plan.own;
  const int head_groups = b.num_q_heads / kGroup;
  if (item >= std::int64_t(b.num_rows) * head_groups * split.num_splits) return;
  const auto [r, g, s] = warp_item(item, head_groups, split.num_splits);
  const int h0 = g * kGroup;  // heads h0 .. h0 + kGroup - 1, all of one KV head
  const int kv_head = h0 / (b.num_q_heads / b.num_kv_heads);
  const int first = b.row_start != nullptr ? b.row_start[r] : 0;
  const int begin = first + s * split.positions_per_split;
  const int end = min(b.row_pos[r] + 1, begin + split.positions_per_split);  // causal: up to row_pos

  float q[kGroup][kLanes], k[kLanes], v[kLanes];
  RowState<kLanes> st[kGroup];
#pragma unroll
  for (int i = 0; i < kGroup; ++i) {
    load_q(b, r, h0 + i, lane, q[i]);
    st[i].reset();
  }
  const std::int32_t* table = b.page_table + b.row_table[r];
  for (int t = begin; t < end; ++t) {
    load_kv(b, table, kv_head, t, lane, k, v);
#pragma unroll
    for (int i = 0; i < kGroup; ++i) st[i].add(score_of(q[i], k, b.scale), v);
  }
#pragma unroll
  for (int i = 0; i < kGroup; ++i) {
    const int h = h0 + i;
    if (plan.slots() == 1)  // the row's one state: no merge
      st[i].store_output(b.out + (std::int64_t(r) * b.num_q_heads + h) * b.head_dim, lane, b.head_dim);
    else
      st[i].store(state_at(scratch, b, r, h, s, plan.slots()), lane, b.head_dim);
  }
}

// A tile's shared pass on CUDA cores: positions of one split of the shared part for 8
// rows of the tile, each K/V element loaded once for all of them.
template <int kLanes>
__global__ void attention_shared_kernel(PagedAttentionBatch b, Plan plan, float* scratch) {
  const std::int64_t item = std::int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const Split split = plan.shared;
  constexpr int kParts = kSharedTileRows / kCoreTileRows;
  if (item >= std::int64_t(b.num_tiles) * kParts * b.num_q_heads * split.num_splits) return;
  const auto [tile_part, h, s] = warp_item(item, b.num_q_heads, split.num_splits);
  const int tile = tile_part / kParts;
  const int kv_head = h / (b.num_q_heads / b.num_kv_heads);
  const std::int32_t* tile_rows = b.tile_rows + std::int64_t(tile) * kSharedTileRows;
  const std::int32_t* rows = tile_rows + (tile_part % kParts) * kCoreTileRows;
  if (rows[0] < 0) return;  // past the tile's last row
  const int begin = s * split.positions_per_split;
  const int end = min(b.tile_length[tile], begin + split.positions_per_split);

  float q[kCoreTileRows][kLanes], k[kLanes], v[kLanes];
  RowState<kLanes> st[kCoreTileRows];
#pragma unroll
  for (int i = 0; i < kCoreTileRows; ++i) {
    if (rows[i] >= 0) load_q(b, rows[i], h, lane, q[i]);
    st[i].reset();
  }
  const std::int32_t* table = b.page_table + b.row_table[tile_rows[0]];  // every row's table begins alike
  for (int t = begin; t < end; ++t) {
    load_kv(b, table, kv_head, t, lane, k, v);
#pragma unroll
    for (int i = 0; i < kCoreTileRows; ++i)
      if (rows[i] >= 0) st[i].add(score_of(q[i], k, b.scale), v);  // the same rows for the whole warp
  }
#pragma unroll
  for (int i = 0; i < kCoreTileRows; ++i)
    if (rows[i] >= 0)
      st[i].store(state_at(scratch, b, rows[i], h, plan.own.num_splits + s, plan.slots()), lane, b.head_dim);
}

// A block's shared memory in the tensor-core pass, for heads of at most kDim elements
// (rows kDim apart; every array 32-byte aligned, as the warp matrix functions require):
// 16 positions' K and V, read by the block's kHeads warps, and each warp's own arrays.
template <int kDim>
struct alignas(32) MmaWarpShared {
  // Each row's unnormalised weighted V sum (before the first position: the tile's
  // queries in f16, on their way to registers).
  float o[kMmaRows * kDim];
  float s[kMmaRows * kMmaRows];   // scores of the 16 positions
  __half p[kMmaRows * kMmaRows];  // their softmax weights
};
template <int kDim, int kHeads>
struct alignas(32) MmaBlockShared {
  __half k[kMmaRows * kDim], v[kMmaRows * kDim];  // past the end: zeros
  MmaWarpShared<kDim> warp[kHeads];
};
// Whether kHeads warps' worth fits in the static shared memory a block may have.
template <int kLanes, int kHeads>
constexpr bool mma_block_fits = sizeof(MmaBlockShared<32 * kLanes, kHeads>) <= kMaxStaticSharedBytes;

// K and V of positions t0..t0 + 15 (zeros from `end` on) into shared memory, 8 elements
// (16 bytes) a load, by threads `first`, `first + stride`, ...
template <int kDim, int kHeads>
__device__ void load_kv_block(const PagedAttentionBatch& b, const std::int32_t* table, int kv_head, int t0, int end,
                              int first, int stride, MmaBlockShared<kDim, kHeads>& sh) {
  const int chunks = b.head_dim / 8;
  for (int e = first; e < kMmaRows * chunks; e += stride) {
    const int j = e / chunks, c = e % chunks, t = t0 + j;
    uint4 k = {0u, 0u, 0u, 0u}, v = {0u, 0u, 0u, 0u};
    if (t < end) {
      const std::uint16_t* page = b.kv_base + std::int64_t(table[t / b.page_size]) * b.elements_per_page;
      const std::int64_t at = (std::int64_t(kv_head) * b.page_size + t % b.page_size) * b.head_dim + c * 8;
      k = *reinterpret_cast<const uint4*>(page + b.k_offset + at);
      v = *reinterpret_cast<const uint4*>(page + b.v_offset + at);
    }
    *reinterpret_cast<uint4*>(sh.k + j * kDim + c * 8) = k;
    *reinterpret_cast<uint4*>(sh.v + j * kDim + c * 8) = v;
  }
}

// A tile's shared pass on tensor cores: one block per (tile, kHeads query heads of one KV
// head (GQA), split), one warp per head. The block loads each 16 positions' K and V once
// for its warps; each warp keeps its tile's queries in registers (as matrix fragments).
// Lanes 2i and 2i + 1 keep row i's running max m and sum l (the same values in both) and
// each scale half of its 16 scores and of its output sums.
template <int kLanes, int kHeads>
__global__ void attention_shared_mma_kernel(PagedAttentionBatch b, Plan plan, float* scratch) {
  namespace wmma = nvcuda::wmma;
  constexpr int kDim = 32 * kLanes;
  __shared__ MmaBlockShared<kDim, kHeads> sh;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const Split split = plan.shared;
  const int head_groups = b.num_q_heads / kHeads;
  // The whole block returns, or none of it (its __syncthreads).
  if (std::int64_t(blockIdx.x) >= std::int64_t(b.num_tiles) * head_groups * split.num_splits) return;
  MmaWarpShared<kDim>& mine = sh.warp[warp];
  const auto [tile, group, s] = warp_item(blockIdx.x, head_groups, split.num_splits);
  const int h = group * kHeads + warp;  // the block's heads read one KV head: kHeads divides the GQA group
  const int kv_head = h / (b.num_q_heads / b.num_kv_heads), dim = b.head_dim;
  const std::int32_t* rows = b.tile_rows + std::int64_t(tile) * kSharedTileRows;
  const int begin = s * split.positions_per_split;
  const int end = min(b.tile_length[tile], begin + split.positions_per_split);

  // The queries, f16 in `mine.o` for the fragment loads, then o's zeros.
  __half* q16 = reinterpret_cast<__half*>(mine.o);
  for (int e = lane; e < kMmaRows * dim; e += 32) {
    const int i = e / dim, d = e % dim, r = rows[i];
    const float x = r >= 0 ? b.q[(std::int64_t(r) * b.num_q_heads + h) * dim + d] : 0.f;
    q16[i * kDim + d] = __float2half_rn(fminf(fmaxf(x, -65504.f), 65504.f));  // no infinities
  }
  __syncwarp();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> qf[kDim / 16];
#pragma unroll
  for (int c = 0; c < kDim / 16; ++c)
    if (16 * c < dim) wmma::load_matrix_sync(qf[c], q16 + 16 * c, kDim);
  __syncwarp();
  for (int e = lane; e < kMmaRows * dim; e += 32) mine.o[e / dim * kDim + e % dim] = 0.f;

  const int row = lane / 2, col0 = 8 * (lane % 2);  // this lane's row and first of 8 columns
  float m = -INFINITY, l = 0.f;
  const std::int32_t* table = b.page_table + b.row_table[rows[0]];  // every row's table begins alike
  // The same positions for every warp of the block.
  for (int t0 = begin; t0 < end; t0 += kMmaRows) {
    __syncthreads();  // every warp done with the last block's K and V (and its own P and O)
    load_kv_block(b, table, kv_head, t0, end, threadIdx.x, kHeads * 32, sh);
    __syncthreads();
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> scores;
    wmma::fill_fragment(scores, 0.f);
#pragma unroll
    for (int c = 0; c < kDim / 16; ++c) {
      if (16 * c >= dim) break;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> kf;  // K^T
      wmma::load_matrix_sync(kf, sh.k + 16 * c, kDim);
      wmma::mma_sync(scores, qf[c], kf, scores);
    }
    wmma::store_matrix_sync(mine.s, scores, kMmaRows, wmma::mem_row_major);
    __syncwarp();
    // Online softmax of this lane's 8 scores; position t0 < end keeps m finite.
    float x[8], block_max = -INFINITY;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      x[j] = t0 + col0 + j < end ? mine.s[row * kMmaRows + col0 + j] * b.scale : -INFINITY;
      block_max = fmaxf(block_max, x[j]);
    }
    const float m_new = fmaxf(m, fmaxf(block_max, __shfl_xor_sync(0xffffffffu, block_max, 1)));
    const float correction = expf(m - m_new);  // 0 on the first block (m = -inf)
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const __half p = __float2half_rn(expf(x[j] - m_new));
      mine.p[row * kMmaRows + col0 + j] = p;
      sum += __half2float(p);  // the weight the product uses
    }
    l = l * correction + sum + __shfl_xor_sync(0xffffffffu, sum, 1);
    m = m_new;
    for (int d = lane % 2; d < dim; d += 2) mine.o[row * kDim + d] *= correction;
    __syncwarp();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> pf;
    wmma::load_matrix_sync(pf, mine.p, kMmaRows);
    for (int d0 = 0; d0 < dim; d0 += 16) {
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> vf;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> of;
      wmma::load_matrix_sync(vf, sh.v + d0, kDim);
      wmma::load_matrix_sync(of, mine.o + d0, kDim, wmma::mem_row_major);
      wmma::mma_sync(of, pf, vf, of);
      wmma::store_matrix_sync(mine.o + d0, of, kDim, wmma::mem_row_major);
    }
  }
  __syncwarp();
  const int slot = plan.own.num_splits + s;
  for (int e = lane; e < kMmaRows * dim; e += 32) {
    const int i = e / dim, d = e % dim;
    if (rows[i] >= 0) state_at(scratch, b, rows[i], h, slot, plan.slots())[d] = mine.o[i * kDim + d];
  }
  if (lane % 2 == 0 && rows[row] >= 0) {
    float* state = state_at(scratch, b, rows[row], h, slot, plan.slots());
    state[dim] = m;  // -inf (and l = 0) for a split with no position
    state[dim + 1] = l;
  }
}

// One warp per (row, head): out = sum_s u_s e^(m_s - M) / sum_s l_s e^(m_s - M) over the
// row's own splits and, for a row in a tile, the shared splits.
template <int kLanes>
__global__ void attention_merge_kernel(PagedAttentionBatch b, Plan plan, const float* scratch) {
  const std::int64_t item = std::int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (item >= std::int64_t(b.num_rows) * b.num_q_heads) return;
  const int r = int(item / b.num_q_heads);
  const bool in_tile = b.row_start != nullptr && b.row_start[r] > 0;
  const int used = in_tile ? plan.slots() : plan.own.num_splits;
  const int stride = b.head_dim + 2;
  const float* states = scratch + item * plan.slots() * stride;
  float big_m = -INFINITY;
  for (int s = 0; s < used; ++s) big_m = fmaxf(big_m, states[s * stride + b.head_dim]);
  float denominator = 0.f, acc[kLanes] = {};
  for (int s = 0; s < used; ++s) {
    const float* state = states + s * stride;
    const float l = state[b.head_dim + 1];
    if (l == 0.f) continue;  // an empty split
    const float w = expf(state[b.head_dim] - big_m);
    denominator += l * w;
#pragma unroll
    for (int j = 0; j < kLanes; ++j) {
      const int d = lane + 32 * j;
      if (d < b.head_dim) acc[j] += state[d] * w;
    }
  }
  float* out = b.out + item * b.head_dim;  // item = r * num_q_heads + h
#pragma unroll
  for (int j = 0; j < kLanes; ++j) {
    const int d = lane + 32 * j;
    if (d < b.head_dim) out[d] = acc[j] / denominator;
  }
}

unsigned blocks_for(std::int64_t warps) { return unsigned((warps + kWarpsPerBlock - 1) / kWarpsPerBlock); }

using AttentionKernel = void (*)(PagedAttentionBatch, Plan, float*);

// A pass whose kernels take kHeads query heads of one KV head (a warp's or a block's):
// whether kHeads fit, and the kernel.
template <int kLanes>
struct OwnPass {  // heads a warp: at most 16 floats of queries a lane
  template <int kHeads>
  static constexpr bool fits = kHeads * kLanes <= 16;
  template <int kHeads>
  static AttentionKernel kernel() { return &attention_split_kernel<kLanes, kHeads>; }
};
template <int kLanes>
struct SharedMmaPass {  // heads a block: its static shared memory
  template <int kHeads>
  static constexpr bool fits = mma_block_fits<kLanes, kHeads>;
  template <int kHeads>
  static AttentionKernel kernel() { return &attention_shared_mma_kernel<kLanes, kHeads>; }
};

// The most of 4, 3, 2 heads that divides the heads reading one KV head and that Pass
// fits (else 1), with its kernel; kernels never picked are not instantiated.
template <class Pass>
std::pair<int, AttentionKernel> heads_and_kernel(const PagedAttentionBatch& b) {
  const int group = b.num_q_heads / b.num_kv_heads;
  if constexpr (Pass::template fits<4>)
    if (group % 4 == 0) return {4, Pass::template kernel<4>()};
  if constexpr (Pass::template fits<3>)
    if (group % 3 == 0) return {3, Pass::template kernel<3>()};
  if constexpr (Pass::template fits<2>)
    if (group % 2 == 0) return {2, Pass::template kernel<2>()};
  return {1, Pass::template kernel<1>()};
}

// The own pass: a warp per (row, heads, split).
template <int kLanes>
void launch_split(const PagedAttentionBatch& batch, const Plan& plan, float* scratch, cudaStream_t stream) {
  const auto [heads, kernel] = heads_and_kernel<OwnPass<kLanes>>(batch);
  const std::int64_t warps = std::int64_t(batch.num_rows) * (batch.num_q_heads / heads) * plan.own.num_splits;
  kernel<<<blocks_for(warps), kWarpsPerBlock * 32, 0, stream>>>(batch, plan, scratch);
}

// The tensor-core shared pass: a block per (tile, heads, split), a warp a head.
template <int kLanes>
void launch_shared_mma(const PagedAttentionBatch& batch, const Plan& plan, float* scratch, cudaStream_t stream) {
  const auto [heads, kernel] = heads_and_kernel<SharedMmaPass<kLanes>>(batch);
  const std::int64_t blocks = std::int64_t(batch.num_tiles) * (batch.num_q_heads / heads) * plan.shared.num_splits;
  kernel<<<unsigned(blocks), heads * 32, 0, stream>>>(batch, plan, scratch);
}

// The three passes for heads of at most 32 * kLanes elements. (Kernel pointers first:
// a template-id before <<< >>> would not survive the CUDA emulator's rewrite.)
template <int kLanes>
void launch(const PagedAttentionBatch& batch, const Plan& plan, float* scratch, cudaStream_t stream) {
  auto* shared_kernel = &attention_shared_kernel<kLanes>;
  auto* merge_kernel = &attention_merge_kernel<kLanes>;
  const std::int64_t items = std::int64_t(batch.num_rows) * batch.num_q_heads;
  launch_split<kLanes>(batch, plan, scratch, stream);
  if (plan.shared.num_splits > 0) {
    if (shared_pass_uses_tensor_cores(batch)) {
      launch_shared_mma<kLanes>(batch, plan, scratch, stream);
    } else {
      const std::int64_t warps = std::int64_t(batch.num_tiles) * batch.num_q_heads * plan.shared.num_splits *
                                 (kSharedTileRows / kCoreTileRows);
      shared_kernel<<<blocks_for(warps), kWarpsPerBlock * 32, 0, stream>>>(batch, plan, scratch);
    }
  }
  if (plan.slots() > 1) merge_kernel<<<blocks_for(items), kWarpsPerBlock * 32, 0, stream>>>(batch, plan, scratch);
}

}  // namespace

int attention_splits(const PagedAttentionBatch& batch) { return plan_of(batch).own.num_splits; }

std::size_t attention_scratch_bytes(const PagedAttentionBatch& batch) {
  return std::size_t(batch.num_rows) * batch.num_q_heads * std::size_t(plan_of(batch).slots()) *
         std::size_t(batch.head_dim + 2) * sizeof(float);
}

bool shared_pass_uses_tensor_cores(const PagedAttentionBatch& b) {
  // 16-byte K/V loads: every row of the pool starts at a multiple of 8 elements.
  const bool aligned = reinterpret_cast<std::uintptr_t>(b.kv_base) % 16 == 0 && b.elements_per_page % 8 == 0 &&
                       b.k_offset % 8 == 0 && b.v_offset % 8 == 0;
  return b.tensor_cores && b.head_dim % 16 == 0 && aligned;
}

void paged_attention(const PagedAttentionBatch& batch, float* scratch, cudaStream_t stream) {
  if (batch.num_rows <= 0) return;
  const Plan plan = plan_of(batch);
  static_assert(kMaxHeadDim == 32 * 8, "the widest instantiation must hold kMaxHeadDim");
  if (batch.head_dim <= 64)
    launch<2>(batch, plan, scratch, stream);
  else if (batch.head_dim <= 128)
    launch<4>(batch, plan, scratch, stream);
  else
    launch<8>(batch, plan, scratch, stream);
}

}  // namespace arbor::kernels::cuda

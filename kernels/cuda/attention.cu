// Paged attention (see attention.hpp). One warp per (row, query head, split): lanes hold
// interleaved elements of the head (element lane + 32 j), so q.k is a per-lane partial
// dot and a warp reduction, and the weighted V sum stays in registers.
#include <algorithm>

#include "kernels/cuda/attention.hpp"
#include "kernels/cuda/quant.cuh"

namespace arbor::kernels::cuda {
namespace {

constexpr int kPerLane = kMaxHeadDim / 32;
constexpr int kWarpsPerBlock = 4;
constexpr int kMinPositionsPerSplit = 256;
constexpr std::int64_t kTargetItems = std::int64_t(1) << 18;  // warps worth launching at most, roughly

struct Split {
  int num_splits, positions_per_split;
};

Split split_of(const PagedAttentionBatch& b) {
  const std::int64_t items = std::max<std::int64_t>(1, std::int64_t(b.num_rows) * b.num_q_heads);
  const int max_splits = std::max(1, (b.max_positions + kMinPositionsPerSplit - 1) / kMinPositionsPerSplit);
  const int wanted = int(std::clamp<std::int64_t>(kTargetItems / items, 1, max_splits));
  const int per_split = (b.max_positions + wanted - 1) / wanted;
  return {(b.max_positions + per_split - 1) / per_split, per_split};
}

__global__ void attention_split_kernel(PagedAttentionBatch b, Split split, float* scratch) {
  const std::int64_t item = std::int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const std::int64_t num_items = std::int64_t(b.num_rows) * b.num_q_heads * split.num_splits;
  if (item >= num_items) return;
  const int s = int(item % split.num_splits);
  const int h = int((item / split.num_splits) % b.num_q_heads);
  const int r = int(item / (std::int64_t(split.num_splits) * b.num_q_heads));
  const int kv_head = h / (b.num_q_heads / b.num_kv_heads);
  const int last = b.row_pos[r];  // causal: positions 0..last
  const int begin = s * split.positions_per_split;
  const int end = min(last + 1, begin + split.positions_per_split);

  float q[kPerLane], acc[kPerLane];
  const float* qr = b.q + (std::int64_t(r) * b.num_q_heads + h) * b.head_dim;
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int d = lane + 32 * j;
    q[j] = d < b.head_dim ? qr[d] : 0.f;
    acc[j] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  const std::int32_t* table = b.page_table + b.row_table[r];
  for (int t = begin; t < end; ++t) {
    const std::uint16_t* page = b.kv_base + std::int64_t(table[t / b.page_size]) * b.elements_per_page;
    const std::int64_t row_off = (std::int64_t(kv_head) * b.page_size + t % b.page_size) * b.head_dim;
    const std::uint16_t* k = page + b.k_offset + row_off;
    const std::uint16_t* v = page + b.v_offset + row_off;
    float dot = 0.f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int d = lane + 32 * j;
      if (d < b.head_dim) dot = fmaf(q[j], __half2float(__ushort_as_half(k[d])), dot);
    }
    const float score = warp_sum(dot) * b.scale;
    const float m_new = fmaxf(m, score);
    const float correction = expf(m - m_new);  // 0 on the first position (m = -inf)
    const float p = expf(score - m_new);
    l = l * correction + p;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int d = lane + 32 * j;
      const float vd = d < b.head_dim ? __half2float(__ushort_as_half(v[d])) : 0.f;
      acc[j] = fmaf(p, vd, acc[j] * correction);
    }
    m = m_new;
  }
  // Scratch per item ((row, head, split), splits innermost): head_dim unnormalised
  // sums, then m and l.
  float* state = scratch + item * (b.head_dim + 2);
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int d = lane + 32 * j;
    if (d < b.head_dim) state[d] = acc[j];
  }
  if (lane == 0) {
    state[b.head_dim] = m;  // -inf (and l = 0) for a split past the row's last position
    state[b.head_dim + 1] = l;
  }
}

// One warp per (row, head): out = sum_s u_s e^(m_s - M) / sum_s l_s e^(m_s - M).
__global__ void attention_merge_kernel(PagedAttentionBatch b, Split split, const float* scratch) {
  const std::int64_t item = std::int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (item >= std::int64_t(b.num_rows) * b.num_q_heads) return;
  const std::int64_t first = item * split.num_splits;
  const int stride = b.head_dim + 2;
  float big_m = -INFINITY;
  for (int s = 0; s < split.num_splits; ++s) big_m = fmaxf(big_m, scratch[(first + s) * stride + b.head_dim]);
  float denominator = 0.f, acc[kPerLane] = {};
  for (int s = 0; s < split.num_splits; ++s) {
    const float* state = scratch + (first + s) * stride;
    const float l = state[b.head_dim + 1];
    if (l == 0.f) continue;  // an empty split
    const float w = expf(state[b.head_dim] - big_m);
    denominator += l * w;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int d = lane + 32 * j;
      if (d < b.head_dim) acc[j] += state[d] * w;
    }
  }
  float* out = b.out + item * b.head_dim;  // item = r * num_q_heads + h
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int d = lane + 32 * j;
    if (d < b.head_dim) out[d] = acc[j] / denominator;
  }
}

}  // namespace

int attention_splits(const PagedAttentionBatch& batch) { return split_of(batch).num_splits; }

std::size_t attention_scratch_bytes(const PagedAttentionBatch& batch) {
  return std::size_t(batch.num_rows) * batch.num_q_heads * std::size_t(attention_splits(batch)) *
         std::size_t(batch.head_dim + 2) * sizeof(float);
}

void paged_attention(const PagedAttentionBatch& batch, float* scratch, cudaStream_t stream) {
  if (batch.num_rows <= 0) return;
  const Split split = split_of(batch);
  const std::int64_t items = std::int64_t(batch.num_rows) * batch.num_q_heads;
  const unsigned split_blocks = unsigned((items * split.num_splits + kWarpsPerBlock - 1) / kWarpsPerBlock);
  attention_split_kernel<<<split_blocks, kWarpsPerBlock * 32, 0, stream>>>(batch, split, scratch);
  const unsigned merge_blocks = unsigned((items + kWarpsPerBlock - 1) / kWarpsPerBlock);
  attention_merge_kernel<<<merge_blocks, kWarpsPerBlock * 32, 0, stream>>>(batch, split, scratch);
}

}  // namespace arbor::kernels::cuda

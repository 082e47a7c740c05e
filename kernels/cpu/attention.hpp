// Causal GQA attention of new query rows over a sequence's paged K/V (f16).
// Never materialises the T x T score matrix: K/V are visited one page (tile) at a
// time with an online softmax (running max m, sum l, weighted sum u; old l and u are
// rescaled by exp(m_old - m_new) when the max grows). Pages wholly in a row's
// future are skipped; the diagonal page is masked per row.
#pragma once

#include <cstdint>

namespace arbor::kernels::cpu {

class ThreadPool;

struct PagedAttentionArgs {
  const float* q = nullptr;  // [num_rows][num_q_heads][head_dim], already RoPE'd
  float* out = nullptr;      // same shape as q
  int num_rows = 0;          // new tokens of this sequence
  int first_pos = 0;         // absolute position of row 0; row i sees positions <= first_pos + i
  int num_q_heads = 0;
  int num_kv_heads = 0;      // query head h reads kv head h / (num_q_heads / num_kv_heads)
  int head_dim = 0;
  int page_size = 0;         // tokens per page
  // Per logical page p (p < ceil((first_pos + num_rows) / page_size)): the K (and V)
  // block of this layer, laid out [kv_head][page_size][head_dim] f16. Slot s of page p
  // holds position p * page_size + s. Every position <= first_pos + num_rows - 1 must
  // already be written (the caller stores the new rows' K/V before calling).
  const std::uint16_t* const* k_pages = nullptr;
  const std::uint16_t* const* v_pages = nullptr;
  float scale = 0.f;         // usually 1 / sqrt(head_dim)
};

void paged_attention(const PagedAttentionArgs& args, ThreadPool& pool);

// Batched decode: the same result as paged_attention on each of seqs[0..num_seqs), in
// one parallel pass. A physical page that several sequences hold at the same logical
// index (same k_pages[p] / v_pages[p] pointers, e.g. a shared prompt prefix) is read and
// converted once and all their query vectors run against it. Every element must have
// the same num_q_heads, num_kv_heads, head_dim, page_size and scale (otherwise, or for
// rows > 16 per sequence, it simply calls paged_attention per sequence).
void paged_attention_batch(const PagedAttentionArgs* seqs, int num_seqs, ThreadPool& pool);

// Reference: gathers K/V, builds the full score matrix and applies a plain softmax.
void paged_attention_reference(const PagedAttentionArgs& args);

}  // namespace arbor::kernels::cpu

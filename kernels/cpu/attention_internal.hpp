// Internals of paged_attention shared with its ISA-specific task kernels.
#pragma once

#include "kernels/cpu/attention.hpp"

namespace arbor::kernels::cpu::detail {

// One unit of work: query rows [row_begin, row_end) x the query heads of `kv_head`,
// over logical pages [page_begin, page_end) (clipped to the pages the rows can see).
struct AttentionTask {
  int kv_head = 0;
  int row_begin = 0, row_end = 0;
  int page_begin = 0, page_end = 0;
};

// Per query vector qi = (row - row_begin) * group + g of a task, its unnormalised
// softmax state: acc [num][head_dim], then (running max, running sum) [num][2].
struct AttentionPartial {
  float* acc = nullptr;
  float* ml = nullptr;
};

// Runs the task; writes normalised rows to args.out, or, when `partial` is given,
// the unnormalised state there (the caller merges page splits).
void attention_task_avx2(const PagedAttentionArgs& args, const AttentionTask& task,
                         const AttentionPartial* partial);
void attention_task_avx512(const PagedAttentionArgs& args, const AttentionTask& task,
                           const AttentionPartial* partial);

// Rows [row_begin, row_end) of one sequence, whose query vectors occupy state slots
// q_offset + (row - row_begin) * group + g of a multi-sequence task.
struct AttentionSource {
  const PagedAttentionArgs* args = nullptr;
  int row_begin = 0, row_end = 0;
  int q_offset = 0;
};

// Several sequences, one KV head, logical pages [page_begin, page_end): physical pages
// shared by several sequences are converted once. Writes the unnormalised state of
// every query vector: partial_acc [nq][head_dim], partial_ml [nq][2].
void attention_sources_avx512(const AttentionSource* sources, int num_sources, int kv_head,
                              int page_begin, int page_end, float* partial_acc, float* partial_ml);

// Shared epilogue: out = acc / l, or hand the state to the caller.
void finish_attention_task(const PagedAttentionArgs& args, const AttentionTask& task,
                           const float* acc, int acc_stride, const float* ml,
                           const AttentionPartial* partial);

}  // namespace arbor::kernels::cpu::detail

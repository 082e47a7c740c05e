// Internals of paged_attention shared with its ISA-specific task kernels.
#pragma once

#include "kernels/cpu/attention.hpp"

namespace arbor::kernels::detail {

// Computes rows [r0, r1) x all query heads of KV head `kv_head`, writing args.out.
void attention_task_avx512(const PagedAttentionArgs& args, int kv_head, int r0, int r1);

}  // namespace arbor::kernels::detail

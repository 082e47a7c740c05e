// The shape of the KV cache: how many bytes a token and a page take, and where a
// (layer, K/V, kv head, slot) row lives inside a page. Pure arithmetic.
//
// A page holds `page_size` consecutive token positions of one sequence for every
// layer and KV head, stored as f16, laid out [layer][kind: K=0, V=1][kv_head][slot][head_dim].
// So for one layer, the K block of a page is [kv_head][page_size][head_dim]: exactly
// what kernels::PagedAttentionArgs::k_pages points at.
#pragma once

#include <cstddef>
#include <cstdint>

namespace arbor::cache {

using TokenId = std::int32_t;
using PageId = std::int32_t;
constexpr PageId kNoPage = -1;

enum class KvKind : int { key = 0, value = 1 };

struct KvGeometry {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int page_size = 16;  // tokens per page
  static constexpr std::size_t kBytesPerElement = 2;  // f16

  // 2 (K and V) x layers x kv_heads x head_dim x bytes_per_element (KV rule 8).
  std::size_t bytes_per_token() const {
    return 2ull * num_layers * num_kv_heads * head_dim * kBytesPerElement;
  }
  std::size_t elements_per_page() const {
    return 2ull * num_layers * num_kv_heads * page_size * head_dim;
  }
  std::size_t bytes_per_page() const { return elements_per_page() * kBytesPerElement; }

  // Element offset (in f16 units) of row (layer, kind, head, slot) inside a page.
  std::size_t offset(int layer, KvKind kind, int head, int slot) const {
    return (((std::size_t(layer) * 2 + int(kind)) * num_kv_heads + head) * page_size + slot) *
           std::size_t(head_dim);
  }
  // Pages needed to hold `num_tokens` positions.
  int pages_for(std::int64_t num_tokens) const {
    return int((num_tokens + page_size - 1) / page_size);
  }
  bool valid() const {
    return num_layers > 0 && num_kv_heads > 0 && head_dim > 0 && page_size > 0;
  }
};

}  // namespace arbor::cache

#include "model/engine.hpp"

#include <string>

#include "cache/page_pool.hpp"

namespace arbor::model {

cache::KvGeometry Engine::kv_geometry(int page_size) const {
  const LlamaConfig& c = config();
  return cache::KvGeometry{c.num_layers, c.num_kv_heads, c.head_dim, page_size};
}

Result<void> Engine::check_batch(std::span<const SequenceStep> batch, const cache::PagePool& kv) const {
  const LlamaConfig& c = config();
  const cache::KvGeometry& g = kv.geometry();
  if (g.num_layers != c.num_layers || g.num_kv_heads != c.num_kv_heads || g.head_dim != c.head_dim)
    return fail(ErrorCode::invalid_argument, "KV pool geometry does not match the model");
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const SequenceStep& s = batch[i];
    const std::string where = "sequence " + std::to_string(i) + " of the batch: ";
    if (s.tokens.empty()) return fail(ErrorCode::invalid_argument, where + "no tokens to process");
    const std::int64_t end = std::int64_t(s.start_pos) + std::int64_t(s.tokens.size());
    if (s.start_pos < 0 || end > c.context_length)
      return fail(ErrorCode::too_long, where + "positions up to " + std::to_string(end) +
                                           " exceed the model's context length " +
                                           std::to_string(c.context_length));
    if (std::int64_t(s.pages.size()) < g.pages_for(end))
      return fail(ErrorCode::invalid_argument, where + "page table holds " + std::to_string(s.pages.size()) +
                                                   " pages, " + std::to_string(g.pages_for(end)) + " needed");
    for (int p = 0; p < g.pages_for(end); ++p)
      if (!kv.valid(s.pages[std::size_t(p)]))
        return fail(ErrorCode::invalid_argument, where + "page table entry " + std::to_string(p) + " is not a page");
    for (TokenId t : s.tokens)
      if (t < 0 || t >= c.vocab_size)
        return fail(ErrorCode::invalid_argument, where + "token id " + std::to_string(t) +
                                                     " is outside the vocabulary (0.." +
                                                     std::to_string(c.vocab_size - 1) + ")");
  }
  return {};
}

}  // namespace arbor::model

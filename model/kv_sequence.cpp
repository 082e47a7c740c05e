#include "model/kv_sequence.hpp"

#include <algorithm>

namespace arbor::model {

Result<void> reserve_pages(KvSequence& seq, cache::PagePool& pool, int num_tokens) {
  const int needed = pool.geometry().pages_for(num_tokens) - int(seq.pages.size());
  if (needed <= 0) return {};
  auto pages = pool.allocate(needed);
  if (!pages) return std::unexpected(pages.error());
  for (cache::PageId p : *pages) pool.protect(p);  // private pages of a live sequence
  seq.pages.insert(seq.pages.end(), pages->begin(), pages->end());
  return {};
}

void borrow_prefix(KvSequence& reader, const KvSequence& owner, int num_pages, cache::PagePool& pool) {
  const int page_size = pool.geometry().page_size;
  reader.pages.assign(owner.pages.begin(), owner.pages.begin() + num_pages);
  reader.tokens.assign(owner.tokens.begin(), owner.tokens.begin() + std::ptrdiff_t(num_pages) * page_size);
  reader.borrowed_pages = num_pages;
  for (cache::PageId p : reader.pages) pool.ref(p);
}

void release(KvSequence& seq, cache::PagePool& pool) { truncate(seq, pool, 0); }

void truncate(KvSequence& seq, cache::PagePool& pool, int num_tokens) {
  const std::size_t keep = std::size_t(pool.geometry().pages_for(num_tokens));
  for (std::size_t i = keep; i < seq.pages.size(); ++i) {
    if (i >= std::size_t(seq.borrowed_pages)) pool.unprotect(seq.pages[i]);  // borrowed ones: a reference only
    pool.unref(seq.pages[i]);
  }
  if (keep < seq.pages.size()) seq.pages.resize(keep);
  seq.borrowed_pages = std::min(seq.borrowed_pages, int(seq.pages.size()));
  if (std::size_t(num_tokens) < seq.tokens.size()) seq.tokens.resize(std::size_t(num_tokens));
}

Result<std::vector<float>> prefill(Engine& engine, cache::PagePool& pool, KvSequence& seq,
                                   std::span<const TokenId> tokens, int chunk_size, LogitsMode mode) {
  const std::size_t total = seq.tokens.size() + tokens.size();
  if (total > std::size_t(engine.config().context_length))
    return fail(ErrorCode::too_long, "sequence of " + std::to_string(total) +
                                         " tokens exceeds the model's context length of " +
                                         std::to_string(engine.config().context_length) +
                                         " tokens; shorten the prompt");
  if (auto ok = reserve_pages(seq, pool, int(seq.tokens.size() + tokens.size())); !ok)
    return std::unexpected(ok.error());
  std::vector<float> out;
  StepOutput step_out;
  chunk_size = std::max(1, chunk_size);
  for (std::size_t begin = 0; begin < tokens.size(); begin += std::size_t(chunk_size)) {
    const std::size_t n = std::min(tokens.size() - begin, std::size_t(chunk_size));
    const bool last_chunk = begin + n == tokens.size();
    SequenceStep step{tokens.subspan(begin, n), int(seq.tokens.size()), seq.pages,
                      mode == LogitsMode::all ? LogitsMode::all
                      : (last_chunk && mode == LogitsMode::last) ? LogitsMode::last
                                                                 : LogitsMode::none};
    if (auto ok = engine.forward(std::span(&step, 1), pool, step_out); !ok) return std::unexpected(ok.error());
    out.insert(out.end(), step_out.logits.begin(), step_out.logits.end());
    seq.tokens.insert(seq.tokens.end(), step.tokens.begin(), step.tokens.end());
  }
  return out;
}

Result<std::vector<float>> decode_step(Engine& engine, cache::PagePool& pool,
                                       std::span<KvSequence* const> seqs,
                                       std::span<const TokenId> next) {
  std::vector<SequenceStep> steps;
  steps.reserve(seqs.size());
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    if (auto ok = reserve_pages(*seqs[i], pool, int(seqs[i]->tokens.size()) + 1); !ok)
      return std::unexpected(ok.error());
    steps.push_back({next.subspan(i, 1), int(seqs[i]->tokens.size()), seqs[i]->pages, LogitsMode::last});
  }
  StepOutput out;
  if (auto ok = engine.forward(steps, pool, out); !ok) return std::unexpected(ok.error());
  for (std::size_t i = 0; i < seqs.size(); ++i) seqs[i]->tokens.push_back(next[i]);
  return std::move(out.logits);
}

}  // namespace arbor::model

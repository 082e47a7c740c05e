// The simplest owner of KV for sequences that share nothing: private pages taken
// straight from a PagePool. Used by `arbor perplexity`, `arbor bench engine` and the
// engine tests; the cache actor uses cache::PrefixCache instead, which adds sharing.
#pragma once

#include <span>
#include <vector>

#include "cache/page_pool.hpp"
#include "model/engine.hpp"

namespace arbor::model {

struct KvSequence {
  std::vector<cache::PageId> pages;  // page table; every page private to this sequence
  std::vector<TokenId> tokens;       // tokens whose K/V are stored, in order
};

// Makes the page table cover `num_tokens` positions; out_of_memory (and no change)
// when the pool has too few free pages.
Result<void> reserve_pages(KvSequence& seq, cache::PagePool& pool, int num_tokens);
// Returns every page to the pool and empties the sequence.
void release(KvSequence& seq, cache::PagePool& pool);
// An edit at token m (KV rule 3): keeps positions 0..m-1 and returns the pages that
// held nothing else; the next prefill continues from m.
void truncate(KvSequence& seq, cache::PagePool& pool, int num_tokens);

// Appends `tokens` in chunks of at most `chunk_size` and returns the logits `mode`
// asks for (for `last`: the last token's; for `all`: one row per token).
Result<std::vector<float>> prefill(Engine& engine, cache::PagePool& pool, KvSequence& seq,
                                   std::span<const TokenId> tokens, int chunk_size,
                                   LogitsMode mode = LogitsMode::last);

// One decode step for several sequences at once: appends next[i] to *seqs[i] and
// returns their logits, [seqs.size()][vocab].
Result<std::vector<float>> decode_step(Engine& engine, cache::PagePool& pool,
                                       std::span<KvSequence* const> seqs,
                                       std::span<const TokenId> next);

}  // namespace arbor::model

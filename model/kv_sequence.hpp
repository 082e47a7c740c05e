// The simplest owner of KV for a sequence: private pages taken straight from a PagePool,
// after, optionally, full pages borrowed from another sequence (as a cache reader holds
// a SharedPrefix's pages). Used by `arbor perplexity`, `arbor bench engine` and the
// engine tests; the cache actor uses cache::PrefixCache instead, which adds the tree.
#pragma once

#include <span>
#include <vector>

#include "cache/page_pool.hpp"
#include "model/engine.hpp"

namespace arbor::model {

struct KvSequence {
  std::vector<cache::PageId> pages;  // page table: borrowed pages first, then private ones
  std::vector<TokenId> tokens;       // tokens whose K/V are stored, in order
  // The first borrowed_pages pages are another sequence's full pages, read only: this
  // sequence holds a reference on each, not the protection its private pages have.
  int borrowed_pages = 0;
};

// Makes `reader` (empty) begin with `owner`'s first `num_pages` full pages and their
// tokens, referencing them; the next prefill continues after them (KV rules 10, 14).
void borrow_prefix(KvSequence& reader, const KvSequence& owner, int num_pages, cache::PagePool& pool);

// Makes the page table cover `num_tokens` positions; out_of_memory (and no change)
// when the pool has too few free pages.
Result<void> reserve_pages(KvSequence& seq, cache::PagePool& pool, int num_tokens);
// Returns every page to the pool (drops the references on borrowed ones) and empties the
// sequence.
void release(KvSequence& seq, cache::PagePool& pool);
// An edit at token m (KV rule 3): keeps positions 0..m-1 and returns the pages that
// held nothing else; the next prefill continues from m.
void truncate(KvSequence& seq, cache::PagePool& pool, int num_tokens);

// Appends `tokens` in chunks of at most `chunk_size` and returns the logits `mode`
// asks for (for `last`: the last token's; for `all`: one row per token; `last_token`
// is for forward() itself: here it returns nothing).
Result<std::vector<float>> prefill(Engine& engine, cache::PagePool& pool, KvSequence& seq,
                                   std::span<const TokenId> tokens, int chunk_size,
                                   LogitsMode mode = LogitsMode::last);

// One decode step for several sequences at once: appends next[i] to *seqs[i] and
// returns their logits, [seqs.size()][vocab].
Result<std::vector<float>> decode_step(Engine& engine, cache::PagePool& pool,
                                       std::span<KvSequence* const> seqs,
                                       std::span<const TokenId> next);

}  // namespace arbor::model

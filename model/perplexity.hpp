// Perplexity of a token stream, measured as llama.cpp's `perplexity` tool does: the
// text is cut into chunks of `context` tokens, each chunk is evaluated from scratch,
// and only the second half of each chunk is scored (so every scored token sees at
// least context/2 tokens of history).
#pragma once

#include <functional>
#include <span>

#include "cache/page_pool.hpp"
#include "model/engine.hpp"

namespace arbor::model {

struct PerplexityResult {
  double perplexity = 0;
  double std_error = 0;  // of the perplexity estimate
  int num_chunks = 0;
  std::size_t num_scored = 0;
};

// invalid_argument when the text holds fewer than `context` tokens or context < 4.
// `on_chunk(i, running_ppl)` is called after each chunk, if set.
Result<PerplexityResult> perplexity(Engine& engine, cache::PagePool& pool, std::span<const TokenId> tokens,
                                    int context, const std::function<void(int, double)>& on_chunk = {});

// -log p(target | logits row), computed stably.
double negative_log_likelihood(std::span<const float> logits, TokenId target);

}  // namespace arbor::model

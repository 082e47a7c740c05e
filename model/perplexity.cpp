#include "model/perplexity.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "model/kv_sequence.hpp"

namespace arbor::model {

double negative_log_likelihood(std::span<const float> logits, TokenId target) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float v : logits) sum += std::exp(double(v - mx));
  return std::log(sum) - double(logits[std::size_t(target)] - mx);
}

Result<PerplexityResult> perplexity(Engine& engine, cache::PagePool& pool, std::span<const TokenId> tokens,
                                    int context, const std::function<void(int, double)>& on_chunk) {
  if (context < 4)
    return fail(ErrorCode::invalid_argument, "perplexity context must be at least 4 tokens");
  if (tokens.size() < std::size_t(context))
    return fail(ErrorCode::invalid_argument, "the text has " + std::to_string(tokens.size()) +
                                                 " tokens, fewer than one context of " + std::to_string(context) +
                                                 "; use a longer text or a smaller --ctx");
  const std::size_t vocab = std::size_t(engine.config().vocab_size);
  const int first = context / 2;
  PerplexityResult out;
  double sum = 0, sum_sq = 0;
  for (std::size_t start = 0; start + std::size_t(context) <= tokens.size(); start += std::size_t(context)) {
    KvSequence seq;
    auto logits = prefill(engine, pool, seq, tokens.subspan(start, std::size_t(context)), context, LogitsMode::all);
    release(seq, pool);
    if (!logits) return std::unexpected(logits.error());
    for (int j = first; j + 1 < context; ++j) {
      const double nll = negative_log_likelihood(
          std::span<const float>(logits->data() + std::size_t(j) * vocab, vocab), tokens[start + std::size_t(j) + 1]);
      sum += nll;
      sum_sq += nll * nll;
      ++out.num_scored;
    }
    ++out.num_chunks;
    if (on_chunk) on_chunk(out.num_chunks, std::exp(sum / double(out.num_scored)));
  }
  const double n = double(out.num_scored), mean = sum / n;
  out.perplexity = std::exp(mean);
  // Delta method: sd(exp(mean)) = exp(mean) * sd(mean).
  const double variance = std::max(0.0, sum_sq / n - mean * mean);
  out.std_error = out.perplexity * std::sqrt(variance / std::max(1.0, n - 1));
  return out;
}

}  // namespace arbor::model

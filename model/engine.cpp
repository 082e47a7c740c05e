#include "model/engine.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "cache/page_pool.hpp"
#include "model/token_mask.hpp"

namespace arbor::model {

cache::KvGeometry Engine::kv_geometry(int page_size) const {
  const LlamaConfig& c = config();
  return cache::KvGeometry{c.num_layers, c.num_kv_heads, c.head_dim, page_size};
}

Result<void> Engine::check_batch(std::span<const SequenceStep> batch, const cache::PagePool& kv,
                                 std::size_t futures) const {
  const LlamaConfig& c = config();
  const cache::KvGeometry& g = kv.geometry();
  if (g.num_layers != c.num_layers || g.num_kv_heads != c.num_kv_heads || g.head_dim != c.head_dim)
    return fail(ErrorCode::invalid_argument, "KV pool geometry does not match the model");
  for (std::size_t i = 0; i < batch.size(); ++i) {
    const SequenceStep& s = batch[i];
    const std::string where = "sequence " + std::to_string(i) + " of the batch: ";
    if (s.tokens.empty()) return fail(ErrorCode::invalid_argument, where + "no tokens to process");
    if (s.logits == LogitsMode::last_token && !s.draw.greedy() &&
        !(s.draw.uniform >= 0.0 && s.draw.uniform < 1.0 && std::isfinite(s.draw.temperature) &&
          !std::isnan(s.draw.top_p)))
      return fail(ErrorCode::invalid_argument,
                  where + "its draw needs a finite temperature, a top_p that is a number and a uniform number "
                          "in [0, 1) (got " + std::to_string(s.draw.temperature) + ", " +
                      std::to_string(s.draw.top_p) + ", " + std::to_string(s.draw.uniform) + ")");
    if (!s.allowed.empty() &&
        (s.logits != LogitsMode::last_token || s.allowed.size() != token_mask_words(c.vocab_size)))
      return fail(ErrorCode::invalid_argument,
                  where + "a token mask needs LogitsMode::last_token and " +
                      std::to_string(token_mask_words(c.vocab_size)) + " words (one bit per token of the " +
                      std::to_string(c.vocab_size) + "-token vocabulary); got " + std::to_string(s.allowed.size()));
    if (s.mask_later && (s.logits != LogitsMode::last_token || !s.allowed.empty()))
      return fail(ErrorCode::invalid_argument,
                  where + "mask_later needs LogitsMode::last_token and no mask of its own (`allowed` empty)");
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
    for (TokenId t : s.tokens) {
      if (is_future_token(t) && future_index(t) >= futures)
        return fail(ErrorCode::invalid_argument,
                    where + "future token " + std::to_string(future_index(t)) + " is not among the " +
                        std::to_string(futures) + " tokens the step submitted before draws");
      if (t >= c.vocab_size)
        return fail(ErrorCode::invalid_argument, where + "token id " + std::to_string(t) +
                                                     " is outside the vocabulary (0.." +
                                                     std::to_string(c.vocab_size - 1) + ")");
    }
  }
  return {};
}

Result<void> Engine::submit(std::span<const SequenceStep> batch, cache::PagePool& kv) {
  if (submitted_.size() >= kMaxStepsInFlight)
    return fail(ErrorCode::internal, "engine: " + std::to_string(kMaxStepsInFlight) +
                                                    " steps are submitted and not collected; collect one first");
  if (!deferred_.empty())
    return fail(ErrorCode::internal, "engine: the step submitted last waits for its masks; supply_masks() first");
  if (auto ok = check_batch(batch, kv, previous_tokens_.size()); !ok) return ok;
  // Future tokens become the ids they stand for: this host engine has them already.
  std::vector<std::vector<TokenId>> resolved(batch.size());
  std::vector<SequenceStep> steps(batch.begin(), batch.end());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (std::none_of(steps[i].tokens.begin(), steps[i].tokens.end(), is_future_token)) continue;
    resolved[i].assign(steps[i].tokens.begin(), steps[i].tokens.end());
    for (TokenId& t : resolved[i])
      if (is_future_token(t)) t = previous_tokens_[future_index(t)];
    steps[i].tokens = resolved[i];
  }
  defer_draws(steps);
  // Outputs reuse the buffers collect() took back, so a step allocates no logits anew.
  StepOutput out;
  if (!spare_.empty()) {
    out = std::move(spare_.back());
    spare_.pop_back();
  }
  if (auto ok = forward(steps, kv, out); !ok) {
    deferred_.clear();
    spare_.push_back(std::move(out));
    return ok;
  }
  previous_tokens_ = out.tokens;  // with draws deferred, supply_masks() sets them
  submitted_.push_back(std::move(out));
  return {};
}

// With a row waiting for its mask, every token row of the step keeps its logits
// (LogitsMode::last) and its draw is noted, its own mask copied: supply_masks() draws.
void Engine::defer_draws(std::span<SequenceStep> steps) {
  if (std::none_of(steps.begin(), steps.end(), [](const SequenceStep& s) { return s.mask_later; })) return;
  deferred_.resize(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    SequenceStep& s = steps[i];
    DeferredRow& row = deferred_[i];
    row = {output_rows(s), s.logits == LogitsMode::last_token, s.mask_later, s.draw, {}};
    if (!row.token) continue;
    row.mask.assign(s.allowed.begin(), s.allowed.end());
    s.logits = LogitsMode::last;
    s.allowed = {};
    s.mask_later = false;
  }
}

Result<void> Engine::supply_masks(std::span<const std::span<const std::uint64_t>> masks) {
  if (deferred_.empty())
    return fail(ErrorCode::internal, "engine: supply_masks() without a submitted step waiting for masks");
  const std::size_t late = std::size_t(
      std::count_if(deferred_.begin(), deferred_.end(), [](const DeferredRow& r) { return r.late; }));
  const std::size_t words = token_mask_words(config().vocab_size);
  if (auto ok = check_late_masks(masks, late, words); !ok) return ok;
  // The step's outputs as it would have returned them: the other rows' logits, and a
  // token for each token row, drawn over its mask.
  StepOutput& out = submitted_.back();
  const std::size_t vocab = std::size_t(config().vocab_size);
  std::vector<float> logits;
  std::vector<TokenId> tokens;
  std::size_t at = 0, next_mask = 0;
  for (DeferredRow& row : deferred_) {
    const std::span<float> row_logits(out.logits.data() + at * vocab, row.outputs * vocab);
    at += row.outputs;
    if (!row.token) {
      logits.insert(logits.end(), row_logits.begin(), row_logits.end());
      continue;
    }
    const std::span<const std::uint64_t> mask = row.late ? masks[next_mask++] : std::span(row.mask);
    if (!mask.empty()) apply_token_mask(mask, row_logits);
    tokens.push_back(draw_token(row_logits, row.draw, draw_scratch_));
  }
  out.logits = std::move(logits);
  out.tokens = std::move(tokens);
  previous_tokens_ = out.tokens;
  deferred_.clear();
  return {};
}

Result<void> Engine::check_late_masks(std::span<const std::span<const std::uint64_t>> masks, std::size_t late,
                                      std::size_t words) {
  if (masks.size() != late)
    return fail(ErrorCode::invalid_argument, "engine: supply_masks() got " + std::to_string(masks.size()) +
                                                 " masks for the " + std::to_string(late) +
                                                 " rows of the step waiting for one");
  for (std::size_t i = 0; i < masks.size(); ++i)
    if (!masks[i].empty() && masks[i].size() != words)
      return fail(ErrorCode::invalid_argument, "engine: late mask " + std::to_string(i) + " has " +
                                                   std::to_string(masks[i].size()) + " words; a mask has " +
                                                   std::to_string(words) + " (or none: empty)");
  return {};
}

Result<void> Engine::collect(StepOutput& out) {
  if (submitted_.empty()) return fail(ErrorCode::internal, "engine: no step was submitted to collect");
  if (!deferred_.empty() && submitted_.size() == 1) {
    // Its draws never ran: the step is dropped, and nothing may take its tokens.
    deferred_.clear();
    previous_tokens_.clear();
    spare_.push_back(std::move(submitted_.front()));
    submitted_.pop_front();
    return fail(ErrorCode::internal, "engine: the step's masks were never supplied (supply_masks()); it is dropped");
  }
  std::swap(out, submitted_.front());  // the caller's old buffers become a spare
  spare_.push_back(std::move(submitted_.front()));
  submitted_.pop_front();
  return {};
}

}  // namespace arbor::model

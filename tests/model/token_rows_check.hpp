// LogitsMode::last_token against the logits themselves, for any backend: a mixed batch
// (decode rows and prefill chunks, with every kind of output) runs twice at the same
// positions, once with logits everywhere and once with last_token on some sequences,
// greedy or sampled. A greedy token must name its row's largest logit (within `tol` of
// the maximum: two runs of a device backend may round a near tie differently); a sampled
// one must be what model::draw_token picks from the row (with tol > 0, for a uniform
// number within 1e-4 of the draw's); the other outputs must not move, and come out in
// batch order. Two token rows carry a token mask (SequenceStep::allowed): the greedy
// one's forbids its row's argmax, the sampled one's allows a fifth of the vocabulary;
// their tokens are those of the same rule over the logits with the masked ones at
// -infinity, and allowed.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "model/engine.hpp"
#include "model/kv_sequence.hpp"
#include "model/token_mask.hpp"
#include "tests/max_abs_diff.hpp"

namespace arbor::model::testing {

// `id` is what `draw` picks from `logits`, or (tol > 0) what it picks with a uniform
// number within 1e-4 of the draw's.
inline void expect_drawn(std::span<const float> logits, TokenDraw draw, TokenId id, float tol, int sequence) {
  std::vector<float> scratch;
  const TokenId expected = draw_token(logits, draw, scratch);
  if (id == expected || tol <= 0) {
    EXPECT_EQ(id, expected) << "sequence " << sequence << ": not the token its draw picks";
    return;
  }
  const double u = draw.uniform;
  draw.uniform = std::max(0.0, u - 1e-4);
  const TokenId below = draw_token(logits, draw, scratch);
  draw.uniform = std::min(1.0 - 1e-9, u + 1e-4);
  const TokenId above = draw_token(logits, draw, scratch);
  EXPECT_TRUE(id == below || id == above)
      << "sequence " << sequence << ": drew " << id << ", the row's logits give " << expected;
}

inline void expect_token_rows_follow_logits(Engine& engine, cache::PagePool& pool, float tol) {
  const int vocab = engine.config().vocab_size;
  // Sequence i has 5 + 4i cached tokens, then runs `new_tokens[i]` more in the step.
  const int new_tokens[] = {1, 6, 1, 1, 5, 3, 2};
  const LogitsMode argmax_modes[] = {LogitsMode::last_token, LogitsMode::all,  LogitsMode::last,
                                     LogitsMode::last_token, LogitsMode::last_token, LogitsMode::none,
                                     LogitsMode::last_token};
  const TokenDraw draws[] = {{}, {}, {}, {.temperature = 0.9f, .top_k = 50, .top_p = 0.9f, .uniform = 0.37},
                             {}, {}, {.temperature = 1.3f, .uniform = 0.81}};
  constexpr int kSeqs = 7;
  KvSequence seqs[kSeqs];
  std::vector<std::vector<TokenId>> inputs(kSeqs);
  for (int i = 0; i < kSeqs; ++i) {
    std::vector<TokenId> prompt;
    for (int t = 0; t < 5 + 4 * i; ++t) prompt.push_back(TokenId((t * 7 + i * 13) % vocab));
    ASSERT_TRUE(prefill(engine, pool, seqs[i], prompt, 16, LogitsMode::none));
    for (int t = 0; t < new_tokens[i]; ++t) inputs[std::size_t(i)].push_back(TokenId((t * 11 + i) % vocab));
    ASSERT_TRUE(reserve_pages(seqs[i], pool, int(seqs[i].tokens.size()) + new_tokens[i]));
  }
  // `masks[i]` (empty: none) goes with sequence i's token row when with_argmax.
  auto run = [&](bool with_argmax, const std::vector<TokenMask>& masks, StepOutput& out) {
    std::vector<SequenceStep> steps;
    for (int i = 0; i < kSeqs; ++i) {
      LogitsMode mode = argmax_modes[i];
      if (!with_argmax && mode == LogitsMode::last_token) mode = LogitsMode::last;
      steps.push_back({inputs[std::size_t(i)], int(seqs[i].tokens.size()), seqs[i].pages, mode, draws[i]});
      if (with_argmax) steps.back().allowed = masks[std::size_t(i)].words();
    }
    auto ok = engine.forward(steps, pool, out);
    ASSERT_TRUE(ok) << ok.error().message;
  };
  StepOutput logits_only, with_argmax;
  std::vector<TokenMask> masks(kSeqs);
  run(false, masks, logits_only);
  // Masks for sequence 0 (greedy; its last row is the first output row) and 3 (sampled).
  masks[0].resize(vocab);
  const float* first_row = logits_only.logits.data();
  const auto first_argmax = TokenId(std::max_element(first_row, first_row + vocab) - first_row);
  for (TokenId t = 0; t < vocab; ++t)
    if (t != first_argmax) masks[0].allow(t);
  masks[3].resize(vocab);
  for (TokenId t = 0; t < vocab; ++t)
    if ((t * 7) % 5 == 1) masks[3].allow(t);
  run(true, masks, with_argmax);
  ASSERT_TRUE(logits_only.tokens.empty());
  ASSERT_EQ(with_argmax.tokens.size(), 4u);

  std::size_t row = 0, kept_row = 0, argmax_row = 0;
  std::set<TokenId> expected_ids;
  for (int i = 0; i < kSeqs; ++i) {
    const LogitsMode mode = argmax_modes[i];
    const std::size_t rows = output_rows({inputs[std::size_t(i)], 0, {}, mode});
    for (std::size_t r = 0; r < rows; ++r, ++row) {
      const float* logits = logits_only.logits.data() + row * std::size_t(vocab);
      if (mode == LogitsMode::last_token) {
        const TokenId id = with_argmax.tokens[argmax_row++];
        ASSERT_GE(id, 0);
        ASSERT_LT(id, vocab);
        std::vector<float> masked(logits, logits + vocab);
        if (masks[std::size_t(i)].size() > 0) {
          masks[std::size_t(i)].apply(masked);
          EXPECT_TRUE(masks[std::size_t(i)].allows(id)) << "sequence " << i << ": drew " << id << ", masked out";
        }
        logits = masked.data();
        if (!draws[i].greedy()) {
          expect_drawn(masked, draws[i], id, tol, i);
          continue;
        }
        const float* best_at = std::max_element(logits, logits + vocab);
        const float best = *best_at;
        expected_ids.insert(TokenId(best_at - logits));
        EXPECT_GE(logits[id], best - tol) << "sequence " << i << ": argmax " << id << " is not its row's maximum";
      } else {
        const float* kept = with_argmax.logits.data() + (kept_row++) * std::size_t(vocab);
        EXPECT_LE(::arbor::testing::max_abs_diff({kept, std::size_t(vocab)}, {logits, std::size_t(vocab)}), tol) << "sequence " << i << " row " << r << ": logits moved";
      }
    }
  }
  EXPECT_EQ(with_argmax.logits.size(), kept_row * std::size_t(vocab));
  EXPECT_GT(expected_ids.size(), 1u) << "every greedy row has the same argmax: this model cannot tell rows apart";
  for (auto& s : seqs) release(s, pool);
}

}  // namespace arbor::model::testing

// LogitsMode::last_argmax against the logits themselves, for any backend: a mixed batch
// (decode rows and prefill chunks, with every kind of output) runs twice at the same
// positions, once with logits everywhere and once with last_argmax on some sequences.
// Each argmax must name its row's largest logit (within `tol` of the maximum: two runs
// of a device backend may round a near tie differently); the other outputs must not
// move, and come out in batch order.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "model/engine.hpp"
#include "model/kv_sequence.hpp"
#include "tests/max_abs_diff.hpp"

namespace arbor::model::testing {

inline void expect_argmax_rows_follow_logits(Engine& engine, cache::PagePool& pool, float tol) {
  const int vocab = engine.config().vocab_size;
  // Sequence i has 5 + 4i cached tokens, then runs `new_tokens[i]` more in the step.
  const int new_tokens[] = {1, 6, 1, 1, 5, 3};
  const LogitsMode argmax_modes[] = {LogitsMode::last_argmax, LogitsMode::all,  LogitsMode::last,
                                     LogitsMode::last_argmax, LogitsMode::last_argmax, LogitsMode::none};
  constexpr int kSeqs = 6;
  KvSequence seqs[kSeqs];
  std::vector<std::vector<TokenId>> inputs(kSeqs);
  for (int i = 0; i < kSeqs; ++i) {
    std::vector<TokenId> prompt;
    for (int t = 0; t < 5 + 4 * i; ++t) prompt.push_back(TokenId((t * 7 + i * 13) % vocab));
    ASSERT_TRUE(prefill(engine, pool, seqs[i], prompt, 16, LogitsMode::none));
    for (int t = 0; t < new_tokens[i]; ++t) inputs[std::size_t(i)].push_back(TokenId((t * 11 + i) % vocab));
    ASSERT_TRUE(reserve_pages(seqs[i], pool, int(seqs[i].tokens.size()) + new_tokens[i]));
  }
  auto run = [&](bool with_argmax, StepOutput& out) {
    std::vector<SequenceStep> steps;
    for (int i = 0; i < kSeqs; ++i) {
      LogitsMode mode = argmax_modes[i];
      if (!with_argmax && mode == LogitsMode::last_argmax) mode = LogitsMode::last;
      steps.push_back({inputs[std::size_t(i)], int(seqs[i].tokens.size()), seqs[i].pages, mode});
    }
    auto ok = engine.forward(steps, pool, out);
    ASSERT_TRUE(ok) << ok.error().message;
  };
  StepOutput logits_only, with_argmax;
  run(false, logits_only);
  run(true, with_argmax);
  ASSERT_TRUE(logits_only.argmax.empty());
  ASSERT_EQ(with_argmax.argmax.size(), 3u);

  std::size_t row = 0, kept_row = 0, argmax_row = 0;
  std::set<TokenId> expected_ids;
  for (int i = 0; i < kSeqs; ++i) {
    const LogitsMode mode = argmax_modes[i];
    const std::size_t rows = output_rows({inputs[std::size_t(i)], 0, {}, mode});
    for (std::size_t r = 0; r < rows; ++r, ++row) {
      const float* logits = logits_only.logits.data() + row * std::size_t(vocab);
      if (mode == LogitsMode::last_argmax) {
        const TokenId id = with_argmax.argmax[argmax_row++];
        ASSERT_GE(id, 0);
        ASSERT_LT(id, vocab);
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

// Engine::supply_masks (the contract's "Late masks"), for any backend, against forward()
// with every mask known up front. Five sequences run four steps, each queued behind the
// one before as the overlapping scheduler queues them: rows 0-3 draw their token (row 1
// sampled), row 4 returns its logits. Step A masks rows 0 and 2 when submitted; B and C
// take A's and B's tokens as future tokens and get their rows' masks late, each a
// function of the token the row was fed (B's row 3 an empty mask: none); D has no masks.
// The reference runs the same steps with forward(), tokens written out and masks given
// up front. Tokens must be equal and allowed by their masks, row 4's logits within `tol`.
// Then the misuse errors: a wrong mask count or size, a submit before the masks, a step
// collected without them (dropped, with an error; the engine serves the next step).
#pragma once

#include <gtest/gtest.h>

#include <array>

#include "model/engine.hpp"
#include "model/kv_sequence.hpp"
#include "model/token_mask.hpp"
#include "tests/max_abs_diff.hpp"

namespace arbor::model::testing {

namespace late_masks {

constexpr int kSeqs = 5, kDrawn = 4, kSteps = 4;
enum class Mask { none, now, later, later_empty };
// Per step (A, B, C, D), per drawing row.
constexpr Mask kMasks[kSteps][kDrawn] = {{Mask::now, Mask::none, Mask::now, Mask::none},
                                         {Mask::later, Mask::later, Mask::none, Mask::later_empty},
                                         {Mask::later, Mask::later, Mask::later, Mask::later},
                                         {Mask::none, Mask::none, Mask::none, Mask::none}};

// Step s's mask for drawing row i, fed `token`: a third of the vocabulary.
inline TokenMask mask_of(int s, int i, TokenId token, int vocab) {
  TokenMask mask(vocab);
  for (TokenId t = 0; t < vocab; ++t)
    if ((t + token + i + s) % 3 == 0) mask.allow(t);
  return mask;
}

// What one run returns: each step's drawn tokens, and row 4's logits.
struct Outputs {
  std::array<std::vector<TokenId>, kSteps> tokens;
  std::array<std::vector<float>, kSteps> logits;
};

// Step s over `seqs` fed `fed` (row 4 fed a fixed token); `later` turns the late rows'
// masks into mask_later, else their masks are given (from `fed`, which must then hold
// the tokens themselves). `masks` holds the masks the steps point at.
inline std::vector<SequenceStep> step(int s, std::array<KvSequence, kSeqs>& seqs, const std::array<TokenId, kSeqs>& fed,
                                      bool later, std::array<TokenMask, kDrawn>& masks, int vocab) {
  std::vector<SequenceStep> steps;
  for (int i = 0; i < kSeqs; ++i) {
    KvSequence& seq = seqs[std::size_t(i)];
    steps.push_back({std::span(&fed[std::size_t(i)], 1), int(seq.tokens.size()) + s, seq.pages,
                     i < kDrawn ? LogitsMode::last_token : LogitsMode::last});
    if (i >= kDrawn) continue;
    if (i == 1) steps.back().draw = TokenDraw{0.8f, 40, 0.95f, 0.37 + 0.1 * s};
    const Mask kind = kMasks[s][i];
    if (kind == Mask::none || (!later && kind == Mask::later_empty)) continue;
    if (later && (kind == Mask::later || kind == Mask::later_empty)) {
      steps.back().mask_later = true;
      continue;
    }
    masks[std::size_t(i)] = mask_of(s, i, fed[std::size_t(i)], vocab);
    steps.back().allowed = masks[std::size_t(i)].words();
  }
  return steps;
}

// The late masks of step s, fed `fed` (the tokens the step before drew).
inline std::vector<TokenMask> late_masks_of(int s, const std::vector<TokenId>& fed, int vocab) {
  std::vector<TokenMask> masks;
  for (int i = 0; i < kDrawn; ++i) {
    if (kMasks[s][i] == Mask::later) masks.push_back(mask_of(s, i, fed[std::size_t(i)], vocab));
    if (kMasks[s][i] == Mask::later_empty) masks.emplace_back();
  }
  return masks;
}

inline std::vector<std::span<const std::uint64_t>> spans(const std::vector<TokenMask>& masks) {
  std::vector<std::span<const std::uint64_t>> out;
  for (const TokenMask& m : masks) out.push_back(m.words());
  return out;
}

}  // namespace late_masks

inline void expect_late_masks_draw_as_masks_given_up_front(Engine& engine, cache::PagePool& pool, float tol) {
  using namespace late_masks;
  const int vocab = engine.config().vocab_size;
  const TokenId row4_token = TokenId(5 % vocab);
  std::array<KvSequence, kSeqs> piped, direct;
  for (int i = 0; i < kSeqs; ++i) {
    std::vector<TokenId> prompt;
    for (int t = 0; t < 4 + 3 * i; ++t) prompt.push_back(TokenId((t * 7 + i * 13 + 2) % vocab));
    for (KvSequence* s : {&piped[std::size_t(i)], &direct[std::size_t(i)]}) {
      ASSERT_TRUE(prefill(engine, pool, *s, prompt, 8, LogitsMode::none));
      ASSERT_TRUE(reserve_pages(*s, pool, int(s->tokens.size()) + kSteps + 1));
    }
  }
  std::array<TokenId, kSeqs> first{}, futures{};
  for (int i = 0; i < kSeqs; ++i) {
    first[std::size_t(i)] = i < kDrawn ? TokenId((3 + 4 * i) % vocab) : row4_token;
    futures[std::size_t(i)] = i < kDrawn ? future_token(std::size_t(i)) : row4_token;
  }
  auto take = [](Outputs& o, int s, StepOutput& out) {
    o.tokens[std::size_t(s)] = out.tokens;
    o.logits[std::size_t(s)] = out.logits;
  };

  // Queued as the overlapping scheduler queues them: submit s+1, collect s, supply s+1.
  Outputs got;
  std::array<std::array<TokenMask, kDrawn>, kSteps> held;
  std::vector<std::vector<SequenceStep>> steps;
  steps.push_back(step(0, piped, first, true, held[0], vocab));
  ASSERT_TRUE(engine.submit(steps.back(), pool));
  for (int s = 1; s <= kSteps; ++s) {
    if (s < kSteps) {
      steps.push_back(step(s, piped, futures, true, held[std::size_t(s)], vocab));
      auto queued = engine.submit(steps.back(), pool);
      ASSERT_TRUE(queued) << "step " << s << ": " << queued.error().message;
    }
    StepOutput out;
    auto collected = engine.collect(out);
    ASSERT_TRUE(collected) << "step " << s - 1 << ": " << collected.error().message;
    ASSERT_EQ(out.tokens.size(), std::size_t(kDrawn)) << "step " << s - 1;
    take(got, s - 1, out);
    if (s == kSteps) continue;
    const std::vector<TokenMask> late = late_masks_of(s, out.tokens, vocab);
    if (late.empty()) continue;  // D
    if (s == 1) {  // misuse first: nothing is queued by a refused call
      auto fewer = spans(late);
      fewer.pop_back();
      auto refused = engine.supply_masks(fewer);
      ASSERT_FALSE(refused);
      EXPECT_EQ(refused.error().code, ErrorCode::invalid_argument);
      auto short_mask = spans(late);
      short_mask[0] = short_mask[0].first(1);
      refused = engine.supply_masks(short_mask);
      ASSERT_FALSE(refused);
      EXPECT_EQ(refused.error().code, ErrorCode::invalid_argument) << refused.error().message;
    }
    auto supplied = engine.supply_masks(spans(late));
    ASSERT_TRUE(supplied) << "step " << s << ": " << supplied.error().message;
  }

  // Written out: each step's tokens and masks known before forward().
  Outputs want;
  std::array<TokenId, kSeqs> fed = first;
  for (int s = 0; s < kSteps; ++s) {
    std::array<TokenMask, kDrawn> masks;
    auto batch = step(s, direct, fed, false, masks, vocab);
    StepOutput out;
    auto ran = engine.forward(batch, pool, out);
    ASSERT_TRUE(ran) << "step " << s << ": " << ran.error().message;
    ASSERT_EQ(out.tokens.size(), std::size_t(kDrawn));
    take(want, s, out);
    for (int i = 0; i < kDrawn; ++i) {
      if (kMasks[s][i] == Mask::now || kMasks[s][i] == Mask::later) {
        EXPECT_TRUE(masks[std::size_t(i)].allows(out.tokens[std::size_t(i)]))
            << "step " << s << " row " << i << " drew " << out.tokens[std::size_t(i)] << ", which its mask forbids";
      }
      fed[std::size_t(i)] = out.tokens[std::size_t(i)];
    }
  }
  for (int s = 0; s < kSteps; ++s) {
    EXPECT_EQ(got.tokens[std::size_t(s)], want.tokens[std::size_t(s)]) << "step " << s;
    ASSERT_EQ(got.logits[std::size_t(s)].size(), std::size_t(vocab)) << "step " << s << ": row 4's logits only";
    EXPECT_LE(::arbor::testing::max_abs_diff(got.logits[std::size_t(s)], want.logits[std::size_t(s)]), tol);
  }

  // Misuse: masks with no step waiting; a submit before the masks; a step collected
  // without them is dropped with an error, and the engine serves the next step.
  auto none = engine.supply_masks({});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, ErrorCode::internal);
  std::array<TokenMask, kDrawn> unused;
  const std::array<TokenId, kSeqs> plain = first;
  auto late_step = step(1, piped, plain, true, unused, vocab);
  ASSERT_TRUE(engine.submit(late_step, pool));
  auto early = engine.submit(late_step, pool);
  ASSERT_FALSE(early);
  EXPECT_NE(early.error().message.find("supply_masks"), std::string::npos) << early.error().message;
  StepOutput dropped;
  auto unsupplied = engine.collect(dropped);
  ASSERT_FALSE(unsupplied);
  EXPECT_NE(unsupplied.error().message.find("never supplied"), std::string::npos) << unsupplied.error().message;
  auto after = step(3, piped, plain, true, unused, vocab);
  StepOutput served;
  ASSERT_TRUE(engine.forward(after, pool, served));
  EXPECT_EQ(served.tokens.size(), std::size_t(kDrawn));
  for (auto& s : piped) release(s, pool);
  for (auto& s : direct) release(s, pool);
}

}  // namespace arbor::model::testing

// Engine::submit/collect and future tokens, for any backend, against forward() with the
// tokens written out. Four sequences decode two steps: step A asks for their argmax;
// step B, submitted before A is collected, feeds those argmaxes back as future tokens in
// another batch order (so a wrong index shows) and returns logits. The same two steps
// run again with forward(), step B's tokens copied from step A's returned argmax. Both
// runs must agree: A's argmax exactly, B's logits within `tol` (a device backend's two
// runs may round differently). Then the misuse errors: a future index the previous step
// did not return, a third step in flight, a collect with nothing submitted.
#pragma once

#include <gtest/gtest.h>

#include <array>

#include "model/engine.hpp"
#include "model/kv_sequence.hpp"
#include "tests/max_abs_diff.hpp"

namespace arbor::model::testing {

inline void expect_future_tokens_follow_argmax(Engine& engine, cache::PagePool& pool, float tol) {
  constexpr int kSeqs = 4;
  const int vocab = engine.config().vocab_size;
  // Two copies of each sequence: one for the overlapped run, one for forward().
  std::array<KvSequence, kSeqs> piped, direct;
  for (int i = 0; i < kSeqs; ++i) {
    std::vector<TokenId> prompt;
    for (int t = 0; t < 3 + 5 * i; ++t) prompt.push_back(TokenId((t * 5 + i * 17 + 1) % vocab));
    for (KvSequence* s : {&piped[std::size_t(i)], &direct[std::size_t(i)]}) {
      ASSERT_TRUE(prefill(engine, pool, *s, prompt, 8, LogitsMode::none));
      ASSERT_TRUE(reserve_pages(*s, pool, int(s->tokens.size()) + 2));
    }
  }
  const std::array<TokenId, kSeqs> first = {TokenId(3 % vocab), TokenId(9 % vocab), TokenId(4 % vocab),
                                            TokenId(12 % vocab)};
  const std::array<int, kSeqs> order_b = {2, 0, 3, 1};  // step B's batch order
  auto step_a = [&](std::array<KvSequence, kSeqs>& seqs) {
    std::vector<SequenceStep> steps;
    for (int i = 0; i < kSeqs; ++i)
      steps.push_back({std::span(&first[std::size_t(i)], 1), int(seqs[std::size_t(i)].tokens.size()),
                       seqs[std::size_t(i)].pages, LogitsMode::last_token});
    return steps;
  };
  auto step_b = [&](std::array<KvSequence, kSeqs>& seqs, const std::array<TokenId, kSeqs>& tokens) {
    std::vector<SequenceStep> steps;
    for (int i : order_b)
      steps.push_back({std::span(&tokens[std::size_t(i)], 1), int(seqs[std::size_t(i)].tokens.size()) + 1,
                       seqs[std::size_t(i)].pages, LogitsMode::last});
    return steps;
  };

  // Overlapped: B queued behind A, its tokens A's future argmaxes.
  std::array<TokenId, kSeqs> futures{};
  for (int i = 0; i < kSeqs; ++i) futures[std::size_t(i)] = future_token(std::size_t(i));
  auto a = step_a(piped);
  ASSERT_TRUE(engine.submit(a, pool));
  auto b = step_b(piped, futures);
  auto submitted = engine.submit(b, pool);
  ASSERT_TRUE(submitted) << submitted.error().message;
  StepOutput a_out, b_out;
  ASSERT_TRUE(engine.collect(a_out));
  ASSERT_TRUE(engine.collect(b_out));

  // Written out: B's tokens are A's argmaxes as the host received them.
  StepOutput a_ref, b_ref;
  auto a2 = step_a(direct);
  ASSERT_TRUE(engine.forward(a2, pool, a_ref));
  ASSERT_EQ(a_ref.tokens.size(), std::size_t(kSeqs));
  std::array<TokenId, kSeqs> fed{};
  for (int i = 0; i < kSeqs; ++i) fed[std::size_t(i)] = a_ref.tokens[std::size_t(i)];
  auto b2 = step_b(direct, fed);
  ASSERT_TRUE(engine.forward(b2, pool, b_ref));

  EXPECT_EQ(a_out.tokens, a_ref.tokens);
  ASSERT_EQ(b_out.logits.size(), b_ref.logits.size());
  EXPECT_LE(::arbor::testing::max_abs_diff(b_out.logits, b_ref.logits), tol);

  // Misuse: an index past the previous step's argmax count (B returned none).
  const TokenId beyond = future_token(0);
  std::vector<SequenceStep> bad = {{std::span(&beyond, 1), int(piped[0].tokens.size()) + 2, piped[0].pages,
                                    LogitsMode::last}};
  ASSERT_TRUE(reserve_pages(piped[0], pool, int(piped[0].tokens.size()) + 3));
  bad[0].pages = piped[0].pages;
  auto refused = engine.submit(bad, pool);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(refused.error().message.find("future token 0"), std::string::npos) << refused.error().message;
  StepOutput none;
  EXPECT_FALSE(engine.collect(none)) << "nothing is in flight";
  // At most kMaxStepsInFlight steps in flight.
  for (std::size_t n = 0; n < Engine::kMaxStepsInFlight; ++n) ASSERT_TRUE(engine.submit(a2, pool));
  EXPECT_FALSE(engine.submit(a2, pool));
  for (std::size_t n = 0; n < Engine::kMaxStepsInFlight; ++n) ASSERT_TRUE(engine.collect(none));
  for (auto& s : piped) release(s, pool);
  for (auto& s : direct) release(s, pool);
}

}  // namespace arbor::model::testing

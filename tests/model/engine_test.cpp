// The paged, batched engine against a naive dense forward pass on a tiny random model.
#include "model/cpu_engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "cache/page_allocator.hpp"
#include "cache/page_pool.hpp"
#include "model/kv_sequence.hpp"
#include "model/token_mask.hpp"
#include "tests/max_abs_diff.hpp"
#include "tests/model/token_rows_check.hpp"
#include "tests/model/future_tokens_check.hpp"
#include "tests/model/late_masks_check.hpp"
#include "tests/model/tiny_llama.hpp"

namespace arbor::model {
namespace {

class TinyEngine : public ::testing::TestWithParam<int /*page size*/> {
 protected:
  void SetUp() override {
    testing::TinyLlamaShape shape;
    shape.context = 1024;  // room for the long-prompt test
    bytes_ = testing::write_tiny_llama(shape, 7);
    auto file = GgufFile::parse(bytes_);
    ASSERT_TRUE(file) << file.error().message;
    file_.emplace(std::move(*file));
    auto config = read_llama_config(*file_);
    ASSERT_TRUE(config) << config.error().message;
    config_ = *config;
    auto weights = bind_llama_weights(*file_, config_);
    ASSERT_TRUE(weights) << weights.error().message;
    weights_ = std::move(*weights);
    engine_.emplace(config_, weights_, 2);
    // Room for 2,048 tokens at every page size (1-token pages need 2,048 pages).
    pool_.emplace(engine_->kv_geometry(GetParam()), std::max(256, 2048 / GetParam()), allocator_);
    // Scramble the free list so page tables are not contiguous (KV rule 9).
    auto all = pool_->allocate(pool_->num_free());
    ASSERT_TRUE(all);
    std::shuffle(all->begin(), all->end(), std::mt19937(3));
    for (auto p : *all) pool_->unref(p);
  }

  std::vector<std::int32_t> random_tokens(int n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::int32_t> t(static_cast<std::size_t>(n));
    for (auto& x : t) x = std::int32_t(rng() % std::uint32_t(config_.vocab_size));
    return t;
  }

  std::vector<std::byte> bytes_;
  std::optional<GgufFile> file_;
  LlamaConfig config_;
  LlamaWeights weights_;
  std::optional<CpuEngine> engine_;
  cache::HostPageAllocator allocator_;
  std::optional<cache::PagePool> pool_;
};

void expect_close(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_LT(::arbor::testing::max_abs_diff(a, b), tol);
}

TEST_P(TinyEngine, ChunkedPrefillMatchesNaiveForward) {
  const auto tokens = random_tokens(45, 11);
  const auto expected = testing::naive_forward(config_, weights_, tokens);
  for (int chunk : {1, 7, 64}) {
    KvSequence seq;
    auto logits = prefill(*engine_, *pool_, seq, tokens, chunk, LogitsMode::all);
    ASSERT_TRUE(logits) << logits.error().message;
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    expect_close(*logits, expected, 2e-2f);  // K/V are stored as f16
    release(seq, *pool_);
  }
  EXPECT_EQ(pool_->num_used(), 0);
}

// Positions far past the short tests' (< 64 tokens) and page tables of tens to hundreds
// of pages: a RoPE or page-indexing bug that only starts at some position or page
// count shows here. Every prompt position's logits, in one chunk and in chunks that
// straddle page boundaries, then decode steps that continue it, against the naive pass.
TEST_P(TinyEngine, LongPromptAcrossManyPagesMatchesNaiveForward) {
  constexpr int kPrompt = 600, kDecode = 12;
  const auto tokens = random_tokens(kPrompt + kDecode, 21);
  const auto expected = testing::naive_forward(config_, weights_, tokens);
  const std::size_t vocab = std::size_t(config_.vocab_size);
  const std::vector<std::int32_t> prompt(tokens.begin(), tokens.begin() + kPrompt);
  ASSERT_GE(pool_->geometry().pages_for(kPrompt), kPrompt / GetParam());
  for (int chunk : {kPrompt, 37}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    KvSequence seq;
    auto logits = prefill(*engine_, *pool_, seq, prompt, chunk, LogitsMode::all);
    ASSERT_TRUE(logits) << logits.error().message;
    expect_close(*logits, std::vector<float>(expected.begin(), expected.begin() + std::ptrdiff_t(kPrompt * vocab)),
                 2e-2f);
    for (int i = kPrompt; i < kPrompt + kDecode; ++i) {
      KvSequence* one[] = {&seq};
      auto step = decode_step(*engine_, *pool_, one, std::span(&tokens[std::size_t(i)], 1));
      ASSERT_TRUE(step) << step.error().message;
      SCOPED_TRACE("decode position " + std::to_string(i));
      expect_close(*step, std::vector<float>(expected.begin() + std::ptrdiff_t(std::size_t(i) * vocab),
                                             expected.begin() + std::ptrdiff_t(std::size_t(i + 1) * vocab)),
                   2e-2f);
    }
    release(seq, *pool_);
  }
  EXPECT_EQ(pool_->num_used(), 0);
}

TEST_P(TinyEngine, BatchedDecodeEqualsOneAtATime) {
  // Three sequences of different lengths decode together; each must match running
  // alone.
  const std::vector<int> lengths = {5, 18, 33};
  std::vector<KvSequence> together(3), alone(3);
  std::vector<std::int32_t> next;
  for (int i = 0; i < 3; ++i) {
    auto prompt = random_tokens(lengths[std::size_t(i)], 100 + std::uint32_t(i));
    ASSERT_TRUE(prefill(*engine_, *pool_, together[std::size_t(i)], prompt, 16));
    ASSERT_TRUE(prefill(*engine_, *pool_, alone[std::size_t(i)], prompt, 16));
    next.push_back(std::int32_t(i + 1));
  }
  for (int step = 0; step < 4; ++step) {
    std::vector<KvSequence*> ptrs = {&together[0], &together[1], &together[2]};
    auto batched = decode_step(*engine_, *pool_, ptrs, next);
    ASSERT_TRUE(batched);
    for (std::size_t i = 0; i < 3; ++i) {
      KvSequence* one[] = {&alone[i]};
      auto single = decode_step(*engine_, *pool_, one, std::span(&next[i], 1));
      ASSERT_TRUE(single);
      std::vector<float> row(batched->begin() + std::ptrdiff_t(i * std::size_t(config_.vocab_size)),
                             batched->begin() + std::ptrdiff_t((i + 1) * std::size_t(config_.vocab_size)));
      expect_close(row, *single, 1e-4f);
      next[i] = std::int32_t(std::max_element(row.begin(), row.end()) - row.begin());
    }
  }
  for (auto& s : together) release(s, *pool_);
  for (auto& s : alone) release(s, *pool_);
  EXPECT_EQ(pool_->num_used(), 0);
}

TEST_P(TinyEngine, TokenRowsFollowTheirLogits) {
  testing::expect_token_rows_follow_logits(*engine_, *pool_, 0.f);
  EXPECT_EQ(pool_->num_used(), 0);
}

// Overlap: a step queued behind another takes that step's argmaxes as future tokens.
TEST_P(TinyEngine, SubmittedStepsTakeFutureTokensFromTheStepBefore) {
  testing::expect_future_tokens_follow_argmax(*engine_, *pool_, 0.f);
  EXPECT_EQ(pool_->num_used(), 0);
}

// Late masks: a constrained row fed a future token gets its mask after submit().
TEST_P(TinyEngine, LateMasksDrawAsMasksGivenUpFront) {
  testing::expect_late_masks_draw_as_masks_given_up_front(*engine_, *pool_, 0.f);
  EXPECT_EQ(pool_->num_used(), 0);
}

TEST_P(TinyEngine, RejectsBadInputWithoutWriting) {
  KvSequence seq;
  std::vector<std::int32_t> bad = {1, 2, config_.vocab_size};  // last id out of range
  auto r = prefill(*engine_, *pool_, seq, bad, 8);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(r.error().message.find("outside the vocabulary"), std::string::npos);

  std::vector<std::int32_t> tokens = {1, 2, 3};
  SequenceStep short_table{tokens, 0, {}, LogitsMode::last};
  StepOutput out;
  auto r2 = engine_->forward(std::span(&short_table, 1), *pool_, out);
  ASSERT_FALSE(r2);
  EXPECT_NE(r2.error().message.find("page table"), std::string::npos);

  KvSequence drawn;
  ASSERT_TRUE(reserve_pages(drawn, *pool_, 3));
  for (const TokenDraw bad_draw : {TokenDraw{.temperature = 0.7f, .uniform = 1.0},
                                   TokenDraw{.temperature = NAN, .uniform = 0.5}}) {
    SequenceStep step{tokens, 0, drawn.pages, LogitsMode::last_token, bad_draw};
    auto r4 = engine_->forward(std::span(&step, 1), *pool_, out);
    ASSERT_FALSE(r4);
    EXPECT_EQ(r4.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(r4.error().message.find("its draw needs"), std::string::npos) << r4.error().message;
  }
  // A token mask one word short, and one on a row that returns logits.
  const TokenMask all_allowed = [&] {
    TokenMask m(config_.vocab_size);
    for (TokenId t = 0; t < config_.vocab_size; ++t) m.allow(t);
    return m;
  }();
  for (const auto& [mode, words] :
       {std::pair{LogitsMode::last_token, all_allowed.words().first(all_allowed.words().size() - 1)},
        std::pair{LogitsMode::last, all_allowed.words()}}) {
    SequenceStep step{tokens, 0, drawn.pages, mode};
    step.allowed = words;
    auto r5 = engine_->forward(std::span(&step, 1), *pool_, out);
    ASSERT_FALSE(r5);
    EXPECT_EQ(r5.error().code, ErrorCode::invalid_argument);
    EXPECT_NE(r5.error().message.find("a token mask needs LogitsMode::last_token"), std::string::npos)
        << r5.error().message;
  }
  release(drawn, *pool_);

  std::vector<std::int32_t> too_long(static_cast<std::size_t>(config_.context_length + 1), 1);
  KvSequence seq2;
  auto r3 = prefill(*engine_, *pool_, seq2, too_long, 600);
  ASSERT_FALSE(r3);
  EXPECT_EQ(r3.error().code, ErrorCode::too_long);
  release(seq, *pool_);
  release(seq2, *pool_);
}

// KV rule 15: RoPE rotates K by absolute position. The same token at four positions
// stores four different K rows (so K computed at one position is never valid at
// another), while V, which is not rotated, is stored identically.
TEST_P(TinyEngine, SameTokenAtOtherPositionsHasOtherKeysSameValues) {
  KvSequence seq;
  const std::vector<std::int32_t> same = {5, 5, 5, 5};
  ASSERT_TRUE(prefill(*engine_, *pool_, seq, same, 8, LogitsMode::none));
  const cache::KvGeometry& g = pool_->geometry();
  auto row = [&](cache::KvKind kind, int pos) {
    const std::uint16_t* page = pool_->page_data(seq.pages[std::size_t(pos / g.page_size)]);
    const std::uint16_t* r = page + g.offset(0, kind, 0, pos % g.page_size);
    return std::vector<std::uint16_t>(r, r + g.head_dim);
  };
  for (int a = 0; a < 4; ++a)
    for (int b = a + 1; b < 4; ++b) {
      EXPECT_NE(row(cache::KvKind::key, a), row(cache::KvKind::key, b)) << a << " vs " << b;
      EXPECT_EQ(row(cache::KvKind::value, a), row(cache::KvKind::value, b)) << a << " vs " << b;
    }
  release(seq, *pool_);
}

INSTANTIATE_TEST_SUITE_P(PageSizes, TinyEngine, ::testing::Values(1, 4, 16, 64));

}  // namespace
}  // namespace arbor::model

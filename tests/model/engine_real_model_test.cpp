// KV rules 3, 12 and 14 on the real default model: reusing cached pages computes the
// same function as computing everything.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "cache/page_allocator.hpp"
#include "cache/page_pool.hpp"
#include "model/cpu_engine.hpp"
#include "model/kv_sequence.hpp"
#include "model/model.hpp"
#include "tests/max_abs_diff.hpp"

namespace arbor::model {
namespace {

using ::arbor::testing::max_abs_diff;

constexpr const char* kParagraph =
    "The history of the city begins with a small settlement on the river, where traders "
    "met to exchange grain, salt and cloth. Over the centuries the town grew into a busy "
    "port. Its merchants built warehouses along the water, and its craftsmen became known "
    "for fine glass and sturdy ships. In the nineteenth century the railway arrived, and "
    "factories rose on the edge of the old town. Today the city is a center of learning and "
    "trade, and visitors come to see its museums, its bridges and its markets.";

class RealModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto m = Model::load(ARBOR_DEFAULT_MODEL);
    ASSERT_TRUE(m) << m.error().message << " (run scripts/fetch_model.sh)";
    model_ = *m;
  }
  static void TearDownTestSuite() { model_.reset(); }

  void SetUp() override {
    ASSERT_TRUE(model_);
    engine_.emplace(model_->config(), model_->weights(), 2);
    pool_.emplace(engine_->kv_geometry(kPageSize), 128, allocator_);
    tokens_ = model_->tokenizer().encode(kParagraph, false);
    ASSERT_GT(tokens_.size(), 80u);
  }

  // Logits of every position of `tokens`, computed from scratch in one sequence.
  std::vector<float> full_prefill(const std::vector<std::int32_t>& tokens) {
    KvSequence seq;
    auto logits = prefill(*engine_, *pool_, seq, tokens, 512, LogitsMode::all);
    EXPECT_TRUE(logits);
    release(seq, *pool_);
    return logits ? *logits : std::vector<float>{};
  }

  static constexpr int kPageSize = 16;
  static inline std::shared_ptr<const Model> model_;
  std::optional<CpuEngine> engine_;
  cache::HostPageAllocator allocator_;
  std::optional<cache::PagePool> pool_;
  std::vector<std::int32_t> tokens_;
};

// A second sequence reads the first one's full pages read-only (KV rule 10), computes
// only the rest, and must produce the same logits as one full prefill (KV rule 14).
TEST_F(RealModel, PrefixFromCachePlusSuffixEqualsFullPrefill) {
  const int vocab = model_->config().vocab_size;
  const auto reference = full_prefill(tokens_);
  KvSequence owner;
  ASSERT_TRUE(prefill(*engine_, *pool_, owner, tokens_, 512, LogitsMode::none));
  for (int prefix_len : {16, 32, 37, 50, 64}) {  // on and off page boundaries
    SCOPED_TRACE("prefix " + std::to_string(prefix_len));
    const int shared_pages = prefix_len / kPageSize;  // only full pages are shared
    const int reused = shared_pages * kPageSize;
    KvSequence reader;
    borrow_prefix(reader, owner, shared_pages, *pool_);
    std::span<const std::int32_t> rest(tokens_.begin() + reused, tokens_.end());
    auto logits = prefill(*engine_, *pool_, reader, rest, 512, LogitsMode::all);
    ASSERT_TRUE(logits) << logits.error().message;
    std::span<const float> expected(reference.begin() + std::ptrdiff_t(std::size_t(reused) * vocab), reference.end());
    EXPECT_LT(max_abs_diff(*logits, expected), 0.05f);
    release(reader, *pool_);
  }
  release(owner, *pool_);
  EXPECT_EQ(pool_->num_used(), 0);
}

// An edit at token m keeps K/V of 0..m-1 and recomputes from m (KV rule 3).
TEST_F(RealModel, EditAtTokenReusesPrefixAndMatchesFreshPrefill) {
  const int vocab = model_->config().vocab_size;
  const int m = 48;  // page aligned: the reused part is exactly m tokens
  std::vector<std::int32_t> edited(tokens_.begin(), tokens_.begin() + m);
  const auto tail = model_->tokenizer().encode(" But none of this was planned by anyone.", false);
  edited.insert(edited.end(), tail.begin(), tail.end());
  const auto fresh = full_prefill(edited);

  KvSequence original;
  ASSERT_TRUE(prefill(*engine_, *pool_, original, tokens_, 512, LogitsMode::none));
  // Drop everything from m on, keep pages 0..m/P-1, re-prefill the edited tail.
  const int used_before = pool_->num_used();
  truncate(original, *pool_, m);
  EXPECT_EQ(original.pages.size(), std::size_t(m / kPageSize));
  EXPECT_EQ(pool_->num_used(), used_before - (int(tokens_.size()) + kPageSize - 1) / kPageSize + m / kPageSize);
  auto logits = prefill(*engine_, *pool_, original, tail, 512, LogitsMode::all);
  ASSERT_TRUE(logits);
  std::span<const float> expected(fresh.begin() + std::ptrdiff_t(std::size_t(m) * vocab), fresh.end());
  EXPECT_LT(max_abs_diff(*logits, expected), 0.05f);
  release(original, *pool_);
}

TEST_F(RealModel, BatchedDecodeEqualsOneAtATime) {
  const int vocab = model_->config().vocab_size;
  std::vector<KvSequence> batch(4), alone(4);
  std::vector<std::int32_t> next(4);
  for (std::size_t i = 0; i < 4; ++i) {
    std::vector<std::int32_t> prompt(tokens_.begin(), tokens_.begin() + 20 + 9 * std::ptrdiff_t(i));
    ASSERT_TRUE(prefill(*engine_, *pool_, batch[i], prompt, 64, LogitsMode::none));
    ASSERT_TRUE(prefill(*engine_, *pool_, alone[i], prompt, 64, LogitsMode::none));
    next[i] = tokens_[prompt.size()];
  }
  for (int step = 0; step < 3; ++step) {
    std::vector<KvSequence*> ptrs = {&batch[0], &batch[1], &batch[2], &batch[3]};
    auto together = decode_step(*engine_, *pool_, ptrs, next);
    ASSERT_TRUE(together);
    for (std::size_t i = 0; i < 4; ++i) {
      KvSequence* one[] = {&alone[i]};
      auto single = decode_step(*engine_, *pool_, one, std::span(&next[i], 1));
      ASSERT_TRUE(single);
      std::span<const float> row(together->data() + i * std::size_t(vocab), std::size_t(vocab));
      EXPECT_LT(max_abs_diff(row, *single), 0.05f);
      next[i] = std::int32_t(std::max_element(row.begin(), row.end()) - row.begin());
    }
  }
  for (auto& s : batch) release(s, *pool_);
  for (auto& s : alone) release(s, *pool_);
}

// A RoPE or layout bug gives perplexity in the thousands; the real model on plain
// English stays low.
TEST_F(RealModel, PerplexityOfEnglishIsLow) {
  const int vocab = model_->config().vocab_size;
  const auto logits = full_prefill(tokens_);
  double nll = 0;
  for (std::size_t t = 0; t + 1 < tokens_.size(); ++t) {
    const float* row = logits.data() + t * std::size_t(vocab);
    const float mx = *std::max_element(row, row + vocab);
    double sum = 0;
    for (int i = 0; i < vocab; ++i) sum += std::exp(double(row[i] - mx));
    nll -= double(row[tokens_[t + 1]] - mx) - std::log(sum);
  }
  const double ppl = std::exp(nll / double(tokens_.size() - 1));
  std::printf("perplexity %.2f over %zu tokens\n", ppl, tokens_.size());
  EXPECT_LT(ppl, 40.0);
  EXPECT_GT(ppl, 1.0);
}

}  // namespace
}  // namespace arbor::model

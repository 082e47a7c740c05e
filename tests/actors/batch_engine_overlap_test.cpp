// Overlap scheduling (BatchEngineConfig::overlap) on the real model: step N+1 is built
// and queued while step N is in flight, greedy rows fed N's argmax as future tokens. The
// reference is the same scheduler stepping synchronously: every output must be the same.
// The CPU engine runs a step inside submit(), so a recording wrapper around it shows what
// the scheduler queued and how many steps it held in flight.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "actors/batch_engine.hpp"
#include "batch_engine_test_util.hpp"

namespace arbor::actors {
namespace {

using namespace testing;

// The real CPU engine, with what the scheduler asked of it recorded.
class RecordingEngine final : public model::Engine {
 public:
  explicit RecordingEngine(std::shared_ptr<model::Engine> inner) : inner_(std::move(inner)) {}
  const model::LlamaConfig& config() const override { return inner_->config(); }
  model::Device device() const override { return inner_->device(); }
  std::string describe() const override { return inner_->describe(); }
  std::shared_ptr<cache::PageAllocator> page_allocator() override { return inner_->page_allocator(); }
  Result<void> forward(std::span<const model::SequenceStep> batch, cache::PagePool& kv,
                       model::StepOutput& out) override {
    return inner_->forward(batch, kv, out);
  }
  Result<void> submit(std::span<const model::SequenceStep> batch, cache::PagePool& kv) override {
    auto ok = inner_->submit(batch, kv);
    if (!ok) return ok;
    max_in_flight = std::max(max_in_flight, ++in_flight);
    for (const auto& s : batch) {
      rows += s.tokens.size();
      future_rows += std::size_t(std::count_if(s.tokens.begin(), s.tokens.end(), model::is_future_token));
      logit_rows += s.logits == model::LogitsMode::last || s.logits == model::LogitsMode::all;
      masked_rows += !s.allowed.empty();
      late_rows += s.mask_later;
    }
    return ok;
  }
  Result<void> supply_masks(std::span<const std::span<const std::uint64_t>> masks) override {
    for (const auto& m : masks) late_masks += !m.empty();
    if (refuse_masks) return fail(ErrorCode::internal, "the device refused the masks");
    return inner_->supply_masks(masks);
  }
  Result<void> collect(model::StepOutput& out) override {
    --in_flight;
    std::this_thread::sleep_for(collect_wait);  // a device's step still running
    return inner_->collect(out);
  }

  std::chrono::milliseconds collect_wait{0};
  bool refuse_masks = false;  // supply_masks() fails (a device error), leaving the step's draws unrun
  int in_flight = 0, max_in_flight = 0;
  std::size_t rows = 0, future_rows = 0, logit_rows = 0, masked_rows = 0;
  std::size_t late_rows = 0, late_masks = 0;  // rows with mask_later; the masks supplied for them

 private:
  std::shared_ptr<model::Engine> inner_;
};

struct Scheduler {
  std::shared_ptr<RecordingEngine> engine = std::make_shared<RecordingEngine>(cpu_engine());
  Harness h;
  explicit Scheduler(bool overlap, int num_pages = 256) : h(with(overlap, num_pages)) {}
  BatchEngineConfig with(bool overlap, int num_pages) {
    BatchEngineConfig c = config(num_pages);
    c.engine = engine;
    c.overlap = overlap;
    return c;
  }
};

// A team with budgets from 1 token (its only token comes from the prompt's last row) to
// 24, one request with a stop string that ends it early, all greedy.
std::vector<std::uint64_t> submit_greedy_team(Harness& h) {
  std::vector<std::uint64_t> ids = submit_team(h, 4, 24);
  ids.push_back(h.submit(chat_prompt(shared_system(), "Say one word."), 1));
  ids.push_back(h.submit(chat_prompt(shared_system(), "Count from one to ten."), 2));
  SeqRequest stopped;
  stopped.tenant = "t";
  stopped.prompt = chat_prompt(shared_system(), "Count from one to ten, in words.");
  stopped.sampling.max_tokens = 24;
  stopped.sampling.stop = {"4."};
  ids.push_back(h.submit(stopped));
  return ids;
}

void expect_same_results(const Scheduler& a, const Scheduler& b, const std::vector<std::uint64_t>& ids_a,
                         const std::vector<std::uint64_t>& ids_b) {
  for (std::size_t i = 0; i < ids_a.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    const SeqResult &x = a.h.results.at(ids_a[i]), &y = b.h.results.at(ids_b[i]);
    ASSERT_TRUE(x.ok) << x.error;
    ASSERT_TRUE(y.ok) << y.error;
    EXPECT_EQ(x.tokens, y.tokens);
    EXPECT_EQ(x.text, y.text);
    EXPECT_EQ(x.finish_reason, y.finish_reason);
    EXPECT_EQ(x.cached_tokens, y.cached_tokens);
    EXPECT_EQ(a.h.streamed.at(ids_a[i]), x.text);
  }
}

TEST(BatchEngineOverlap, GivesTheTokensOfSynchronousStepsWithStepsQueuedBehindEachOther) {
  Scheduler piped(true), direct(false);
  EXPECT_TRUE(piped.h.s->overlaps());
  EXPECT_FALSE(direct.h.s->overlaps());
  const auto a = submit_greedy_team(piped.h), b = submit_greedy_team(direct.h);
  piped.h.drain_checked();
  direct.h.drain_checked();
  expect_same_results(piped, direct, a, b);
  EXPECT_EQ(piped.h.results.at(a[6]).finish_reason, FinishReason::stop) << piped.h.results.at(a[6]).text;
  EXPECT_LT(piped.h.results.at(a[6]).generated_tokens, 20u) << "the stop string ends it early";
  // Overlap held two steps at once and fed decode rows from the device's argmax; the
  // synchronous scheduler never did either.
  EXPECT_EQ(piped.engine->max_in_flight, 2);
  EXPECT_GT(piped.engine->future_rows, 40u);
  EXPECT_EQ(direct.engine->max_in_flight, 1);
  EXPECT_EQ(direct.engine->future_rows, 0u);
  // The rows overlap computes for nothing: one per request that stopped before its budget
  // (its row of the step behind), and none where the budget was known to end.
  EXPECT_LE(piped.engine->rows, direct.engine->rows + 7);
  EXPECT_EQ(piped.engine->in_flight, 0);
  piped.h.expect_clean();
  direct.h.expect_clean();
  EXPECT_EQ(piped.h.s->snapshot().generated_tokens, direct.h.s->snapshot().generated_tokens);
}

// The stats split the steps' time into the engine's (forward_seconds: submits and the
// waits in collect) and the host's (the rest). The last step of an overlapped run only
// collects the step in flight, a wait that must count in the steps' time too, or the
// host's share comes out negative (it did: -15 ms a step on the CUDA emulator).
TEST(BatchEngineOverlap, TheWaitOfTheLastCollectCountsInTheStepTime) {
  Scheduler piped(true);
  piped.engine->collect_wait = std::chrono::milliseconds(50);
  submit_team(piped.h, 2, 3);
  piped.h.drain_checked();
  const CacheSnapshot snap = piped.h.s->snapshot();
  EXPECT_GT(snap.forward_seconds, 0.05 * 3) << "each collect waited";
  EXPECT_LE(snap.forward_seconds, snap.step_seconds);
  piped.h.expect_clean();
}

// Rows under a JSON schema draw in the engine with their mask (no logits come back) and
// take future tokens too: their mask, which follows that token, is supplied late (once
// the step before is collected), so every step of theirs overlaps. A sampled sequence (temperature)
// draws in the engine and takes future tokens like a greedy one: with the same seed it
// gets the same tokens as without overlap (one RNG draw per token, in order), and so
// do the greedy sequences beside it.
TEST(BatchEngineOverlap, SchemaRowsTakeLateMasksAndSampledAndGreedyRowsMatch) {
  Scheduler piped(true), direct(false);
  auto submit_mixed = [](Harness& h) {
    std::vector<std::uint64_t> ids = submit_team(h, 3, 16);
    SeqRequest sampled;
    sampled.tenant = "t";
    sampled.prompt = chat_prompt(shared_system(), "Write a line of poetry.");
    sampled.sampling.max_tokens = 16;
    sampled.sampling.temperature = 0.8f;
    sampled.sampling.seed = 5;
    ids.push_back(h.submit(sampled));
    SeqRequest json = sampled;
    json.prompt = chat_prompt("You reply with one JSON document and nothing else.", "Describe a colour as JSON.");
    json.sampling.temperature = 0.f;
    json.sampling.max_tokens = 60;
    json.json_schema = R"({"type":"object","properties":{"name":{"type":"string","maxLength":10}},
                           "required":["name"],"additionalProperties":false})";
    ids.push_back(h.submit(json));
    return ids;
  };
  const auto a = submit_mixed(piped.h), b = submit_mixed(direct.h);
  piped.h.drain_checked();
  direct.h.drain_checked();
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(piped.h.results.at(a[i]).tokens, direct.h.results.at(b[i]).tokens) << i;
    EXPECT_EQ(piped.h.results.at(a[i]).generated_tokens, i < 3 ? 16u : direct.h.results.at(b[i]).generated_tokens);
  }
  for (std::size_t i = 3; i < a.size(); ++i) {
    const SeqResult& r = piped.h.results.at(a[i]);
    ASSERT_TRUE(r.ok) << r.error;
    EXPECT_GT(r.generated_tokens, 0u);
  }
  EXPECT_FALSE(piped.h.results.at(a[4]).json.empty()) << piped.h.results.at(a[4]).text;
  EXPECT_EQ(piped.h.results.at(a[4]).json, direct.h.results.at(b[4]).json) << "greedy under a schema";
  EXPECT_EQ(piped.engine->logit_rows + direct.engine->logit_rows, 0u) << "a row asked for its logits";
  // Synchronous steps give every mask up front; overlapped ones only the first (the
  // prompt's last row), then late ones: one per token after the first, plus one for
  // the row in flight when the document completed, supplied empty (its token is dropped).
  const std::size_t json_tokens = direct.h.results.at(b[4]).generated_tokens;
  EXPECT_GE(direct.engine->masked_rows, json_tokens);
  EXPECT_EQ(direct.engine->late_rows + direct.engine->late_masks, 0u);
  EXPECT_EQ(piped.engine->masked_rows, 1u);
  EXPECT_EQ(piped.engine->late_masks, direct.engine->masked_rows - 1);
  EXPECT_LE(piped.engine->late_rows, piped.engine->late_masks + 1);
  EXPECT_EQ(piped.engine->max_in_flight, 2);
  piped.h.expect_clean();
}

// The engine refuses a step's late masks (a device error): that step's draws never run,
// so every sequence with a row in it fails with the engine's error, whether or not the
// row was constrained; the step is still collected (the engine drops it), sequences
// outside it go on, and no page stays locked.
TEST(BatchEngineOverlap, RefusedLateMasksFailTheirStepsSequencesAndLeakNothing) {
  Scheduler piped(true);
  SeqRequest json;
  json.tenant = "t";
  json.prompt = chat_prompt("You reply with one JSON document and nothing else.", "Describe a colour as JSON.");
  json.sampling.max_tokens = 40;
  json.json_schema = R"({"type":"object","properties":{"name":{"type":"string"}},"required":["name"]})";
  const std::uint64_t constrained = piped.h.submit(json);
  const std::uint64_t free = piped.h.submit(chat_prompt(shared_system(), "Count to five."), 12);
  for (int i = 0; i < 100 && piped.engine->late_rows == 0; ++i) ASSERT_TRUE(piped.h.step_checked());
  ASSERT_GT(piped.engine->late_rows, 0u) << "no step took a late mask";
  // The next step's late masks are refused.
  piped.engine->refuse_masks = true;
  ASSERT_TRUE(piped.h.step_checked());
  piped.engine->refuse_masks = false;
  const std::uint64_t after = piped.h.submit(chat_prompt(shared_system(), "Name a colour."), 4);
  piped.h.drain_checked();
  for (std::uint64_t id : {constrained, free}) {
    const SeqResult& r = piped.h.results.at(id);
    EXPECT_FALSE(r.ok) << id;
    EXPECT_NE(r.error.find("refused the masks"), std::string::npos) << r.error;
  }
  const SeqResult& later = piped.h.results.at(after);
  ASSERT_TRUE(later.ok) << later.error;
  EXPECT_EQ(later.generated_tokens, 4u);
  EXPECT_EQ(piped.engine->in_flight, 0);
  piped.h.expect_clean();
}

// Sampled rows (temperature, top-k, top-p) take future tokens as greedy ones do, and
// draw the tokens of synchronous steps: the sequence's RNG gives one uniform number per
// token, in order, whenever the step that draws it is built.
TEST(BatchEngineOverlap, SampledRowsTakeFutureTokensAndDrawTheTokensOfSynchronousSteps) {
  Scheduler piped(true), direct(false);
  auto submit_sampled = [](Harness& h) {
    std::vector<std::uint64_t> ids;
    for (int i = 0; i < 3; ++i) {
      SeqRequest r;
      r.tenant = "t";
      r.prompt = chat_prompt(shared_system(), "Write line " + std::to_string(i + 1) + " of a poem about the sea.");
      r.sampling.max_tokens = 12;
      r.sampling.temperature = 0.9;
      r.sampling.top_k = 40;
      r.sampling.top_p = 0.9;
      r.sampling.seed = std::uint64_t(11 + i);
      ids.push_back(h.submit(r));
    }
    return ids;
  };
  const auto a = submit_sampled(piped.h), b = submit_sampled(direct.h);
  piped.h.drain_checked();
  direct.h.drain_checked();
  expect_same_results(piped, direct, a, b);
  EXPECT_GT(piped.engine->future_rows, 0u) << "no sampled row took a future token";
  EXPECT_EQ(direct.engine->future_rows, 0u);
  piped.h.expect_clean();
}

// A request cancelled while its rows are in flight ends "cancelled" with what it had
// generated; the rows in flight are dropped when collected, its pages come back, and the
// others finish as they would have.
TEST(BatchEngineOverlap, CancelWhileAStepIsInFlightLosesNothingAndLeaksNoPage) {
  Scheduler piped(true), direct(false);
  const auto ids = submit_team(piped.h, 4, 20), reference = submit_team(direct.h, 4, 20);
  for (int i = 0; i < 12; ++i) ASSERT_TRUE(piped.h.step_checked());
  ASSERT_EQ(piped.engine->in_flight, 1) << "a step stays in flight between steps";
  piped.h.s->cancel(ids[1]);
  piped.h.drain_checked();
  direct.h.drain();
  const SeqResult& cancelled = piped.h.results.at(ids[1]);
  EXPECT_EQ(cancelled.finish_reason, FinishReason::cancelled);
  EXPECT_LT(cancelled.generated_tokens, direct.h.results.at(reference[1]).generated_tokens);
  EXPECT_EQ(cancelled.tokens, std::vector<std::int32_t>(direct.h.results.at(reference[1]).tokens.begin(),
                                                        direct.h.results.at(reference[1]).tokens.begin() +
                                                            std::ptrdiff_t(cancelled.tokens.size())));
  for (std::size_t i : {0u, 2u, 3u})
    EXPECT_EQ(piped.h.results.at(ids[i]).tokens, direct.h.results.at(reference[i]).tokens) << i;
  EXPECT_EQ(piped.engine->in_flight, 0);
  piped.h.expect_clean();
}

// The scheduler is destroyed with a step in flight: it collects it before the pool goes.
TEST(BatchEngineOverlap, DestroyedWithAStepInFlightCollectsItFirst) {
  Scheduler piped(true);
  submit_team(piped.h, 2, 20);
  for (int i = 0; i < 6; ++i) piped.h.s->step();
  ASSERT_EQ(piped.engine->in_flight, 1);
  piped.h.s.reset();
  EXPECT_EQ(piped.engine->in_flight, 0);
}

}  // namespace
}  // namespace arbor::actors

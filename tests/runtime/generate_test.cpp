// Runtime::generate / start_generate through the shared cache actor.
#include <gtest/gtest.h>

#include <limits>

#include "runtime_test_util.hpp"

namespace arbor::testing {
namespace {

TEST(Generate, SharedSystemPromptHitsWithinATenantOnly) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  GenerateRequest req;
  req.tenant = "acme";
  req.messages = {{"system", long_system("rivers", 8)}, {"user", "Name a long river."}};
  req.sampling.max_tokens = 8;
  auto first = rt->generate(req);
  ASSERT_TRUE(first) << first.error().describe();
  EXPECT_EQ(first->cached_tokens, 0u);
  EXPECT_EQ(first->computed_tokens, first->prompt_tokens);
  EXPECT_GT(first->generated_tokens, 0u);
  EXPECT_FALSE(first->text.empty());

  req.messages[1].content = "Name a short river.";
  auto second = rt->generate(req);
  ASSERT_TRUE(second);
  EXPECT_GE(second->cached_tokens, 96u);  // the system block, page-aligned
  EXPECT_EQ(second->cached_tokens + second->computed_tokens, second->prompt_tokens);

  req.tenant = "other";
  auto third = rt->generate(req);
  ASSERT_TRUE(third);
  EXPECT_EQ(third->cached_tokens, 0u);
  expect_clean(*rt);
  const auto stats = rt->cache_stats();
  EXPECT_GT(stats.tenants.at("acme").hit_tokens, 0u);
  EXPECT_EQ(stats.tenants.at("other").hit_tokens, 0u);
  const auto tree = rt->cache_tree("acme");
  ASSERT_FALSE(tree.empty());
  EXPECT_NE(tree.front().snippet.find("<|im_start|>"), std::string::npos) << tree.front().snippet;
  EXPECT_TRUE(rt->cache_tree("nobody").empty());
}

// Functional check on the default model with its chat template (the model's default
// system message included): the greedy answer names Paris.
TEST(Generate, GreedyAnswerToTheCapitalOfFranceMentionsParis) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  auto req = user_request("What is the capital of France?", 16);
  auto reply = rt->generate(req);
  ASSERT_TRUE(reply) << reply.error().describe();
  EXPECT_NE(reply->text.find("Paris"), std::string::npos) << reply->text;
  expect_clean(*rt);
}

TEST(Generate, StreamedPiecesMakeTheTextAndStopStringsCut) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  auto req = user_request("Count from one to ten in words, separated by commas.", 24);
  std::string streamed;
  auto h = rt->start_generate(req, [&](const std::string& piece) { streamed += piece; });
  ASSERT_TRUE(h);
  const auto r = h->wait();
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(r.tokens.size(), r.generated_tokens);
  ASSERT_GT(r.text.size(), 3u);
  // Greedy is deterministic: stopping at a piece of the text cuts it there.
  const std::string stop = r.text.substr(r.text.size() / 2, 2);
  req.sampling.stop = {stop};
  auto cut = rt->generate(req);
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->finish_reason, FinishReason::stop);
  EXPECT_EQ(cut->text, r.text.substr(0, r.text.find(stop)));
  expect_clean(*rt);
}

TEST(Generate, CancelEndsAGenerationEarly) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  auto req = user_request("Write a long story about a river.", 500);
  std::promise<void> started;
  std::atomic<bool> once{false};
  auto h = rt->start_generate(req, [&](const std::string&) {
    if (!once.exchange(true)) started.set_value();
  });
  ASSERT_TRUE(h);
  started.get_future().wait();
  h->cancel();
  const auto r = h->wait();
  EXPECT_EQ(r.finish_reason, FinishReason::cancelled);
  EXPECT_LT(r.generated_tokens, 500u);
  expect_clean(*rt);
}

// A cancel() right after start_generate can reach the cache actor before the request
// does (the generation actor may not have run yet): it must still cancel. Repeated,
// since which comes first is a matter of timing (found by the CUDA emulator, where the
// request took long to arrive, and the generation ran to max_tokens).
TEST(Generate, CancelRightAfterStartCancels) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  for (int i = 0; i < 20; ++i) {
    auto h = rt->start_generate(user_request("Write a long story about a river.", 300));
    ASSERT_TRUE(h);
    h->cancel();
    const auto r = h->wait();
    EXPECT_EQ(r.finish_reason, FinishReason::cancelled) << "try " << i;
    EXPECT_LT(r.generated_tokens, 300u);
  }
  expect_clean(*rt);
}

// on_done: exactly once per generation, with what wait() returns, for a finished, a
// cancelled and a failed one; nobody has to wait() for it to come.
TEST(Generate, CompletionCallbackComesOnceWithTheOutcome) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  struct Done {
    std::promise<Result<GenerateResult>> outcome;
    std::atomic<int> calls{0};
    GenerationDone callback() {
      return [this](const Result<GenerateResult>& r) {
        if (calls++ == 0) outcome.set_value(r);
      };
    }
  };
  auto req = user_request("Name three rivers.", 12);
  Done finished;
  auto h = rt->start_generate(req, {}, finished.callback());
  ASSERT_TRUE(h);
  const auto outcome = finished.outcome.get_future().get();  // no wait() call before this
  ASSERT_TRUE(outcome) << outcome.error().describe();
  EXPECT_EQ(outcome->generated_tokens, 12u);
  EXPECT_EQ(outcome->text, h->wait().text);

  req.sampling.max_tokens = 2000;
  Done cancelled;
  std::promise<void> started;
  std::atomic<bool> once{false};
  auto c = rt->start_generate(
      req, [&](const std::string&) { if (!once.exchange(true)) started.set_value(); }, cancelled.callback());
  ASSERT_TRUE(c);
  started.get_future().wait();
  c->cancel();
  const auto cancel_outcome = cancelled.outcome.get_future().get();
  ASSERT_TRUE(cancel_outcome);
  EXPECT_EQ(cancel_outcome->finish_reason, FinishReason::cancelled);

  req = user_request(std::string(40000, 'x'), 4);  // longer than the context
  Done failed;
  auto f = rt->start_generate(req, {}, failed.callback());
  ASSERT_TRUE(f);
  const auto fail_outcome = failed.outcome.get_future().get();
  ASSERT_FALSE(fail_outcome);
  EXPECT_EQ(fail_outcome.error().message, f->result().error().message);
  EXPECT_NE(fail_outcome.error().message.find("context"), std::string::npos) << fail_outcome.error().message;

  for (Done* d : {&finished, &cancelled, &failed}) EXPECT_EQ(d->calls.load(), 1);
  expect_clean(*rt);
}

TEST(Generate, RuntimeDestructorCancelsWhatIsRunning) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  auto req = user_request("Write a long story.", 2000);
  auto g = rt->start_generate(req);
  ASSERT_TRUE(g);
  auto run = rt->start(team_workflow("bye", long_system("rivers", 3), 2, 400), {.workflow_is_text = true});
  ASSERT_TRUE(run);
  rt.reset();  // must not hang
  EXPECT_EQ(g->wait().finish_reason, FinishReason::cancelled);
  EXPECT_EQ(run->wait().status, RunStatus::cancelled);
}

// The embedding API checks sampling like every front end (check_sampling,
// common/sampling_settings.hpp): an out-of-range value is an error result, not a crash
// or a silent clamp; the ends of each range are accepted.
TEST(Generate, OutOfRangeSamplingIsAnInvalidArgument) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  auto req = user_request("Hi");
  req.sampling.top_p = 1.5;
  auto r = rt->generate(req);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(r.error().message, "generate: top_p must be in 0..1 (got 1.5)");
  req.sampling = {};
  req.sampling.max_tokens = -1;
  bool done_called = false;
  auto h = rt->start_generate(req, {}, [&](const Result<GenerateResult>&) { done_called = true; });
  ASSERT_FALSE(h);
  EXPECT_EQ(h.error().message, "generate: max_tokens must be in 0..1048576 (got -1)");
  EXPECT_FALSE(done_called);
  req.sampling = {};
  req.sampling.temperature = std::numeric_limits<double>::quiet_NaN();
  ASSERT_FALSE(rt->generate(req));
  req.sampling = {};
  req.sampling.top_k = -3;
  auto k = rt->generate(req);
  ASSERT_FALSE(k);
  EXPECT_EQ(k.error().message, "generate: top_k must be in 0..1048576 (got -3; 0 = off)");

  req.sampling = {.max_tokens = 0, .temperature = 100.0, .top_p = 0.0, .top_k = 1 << 20};
  auto edges = rt->generate(req);  // 0 = prefill only
  ASSERT_TRUE(edges) << edges.error().describe();
  EXPECT_EQ(edges->generated_tokens, 0u);
  expect_clean(*rt);
}

TEST(Generate, BadConfigIsRejected) {
  auto c = small_config();
  c.page_size = 2048;
  auto r = Runtime::create(c);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, "page_size must be in 1..1024 (got 2048)");
  c = small_config();
  c.model_path = "/nonexistent.gguf";
  EXPECT_FALSE(Runtime::create(c));
}

}  // namespace
}  // namespace arbor::testing

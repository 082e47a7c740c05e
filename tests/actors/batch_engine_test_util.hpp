// Shared by the scheduler tests: the real model behind a BatchEngine driven step by step,
// with prompts of a team of agents that share one long system prompt.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/conversation.hpp"
#include "actors/batch_engine.hpp"
#include "actors_test_util.hpp"

namespace arbor::actors::testing {

inline constexpr std::size_t kPage = 16;

inline BatchEngineConfig config(int num_pages = 256, bool caching = true) {
  BatchEngineConfig c;
  c.model = real_model();
  c.engine = cpu_engine();
  c.num_pages = num_pages;
  c.prefix_caching = caching;
  c.prefill_chunk = 64;  // several chunks per prompt: exercises commit-per-chunk
  return c;
}

inline std::vector<std::int32_t> chat_prompt(const std::string& system, const std::string& user) {
  Conversation c(real_model()->tokenizer(), real_chat());
  c.start(system, user);
  return c.prompt();
}

// ~150 tokens with 12 guidelines (the default), ~60 with 4.
inline std::string shared_system(int guidelines = 12) {
  std::string s = "You are a careful assistant for a team of researchers.";
  for (int i = 0; i < guidelines; ++i) s += " Guideline " + std::to_string(i) + ": keep answers short and factual.";
  return s;
}

struct Harness {
  std::unique_ptr<BatchEngine> s;
  std::map<std::uint64_t, SeqResult> results;
  std::vector<std::uint64_t> finished;  // request ids in the order their results came
  std::map<std::uint64_t, std::string> streamed;

  explicit Harness(BatchEngineConfig c) {
    auto r = BatchEngine::create(std::move(c));
    EXPECT_TRUE(r) << r.error().message;
    s = std::move(*r);
  }
  std::uint64_t submit(std::vector<std::int32_t> prompt, int max_tokens, std::string tenant = "t",
                       std::string run = "") {
    SeqRequest req;
    req.tenant = std::move(tenant);
    req.run_id = std::move(run);
    req.prompt = std::move(prompt);
    req.sampling.max_tokens = max_tokens;
    return submit(std::move(req));
  }
  // Submits `req` as it is, with a fresh request id.
  std::uint64_t submit(SeqRequest req) {
    req.request_id = next_request_id();
    const auto id = req.request_id;
    s->submit(std::move(req), 1, [this](const TokenEvent& e) { streamed[e.request_id] += e.text; },
              [this](SeqResult r) {
                finished.push_back(r.request_id);
                results[r.request_id] = std::move(r);
              });
    return id;
  }
  void drain() {
    for (int i = 0; i < 10000 && s->has_work(); ++i) s->step();
    EXPECT_FALSE(s->has_work());
  }
  // One step, then the scheduler's invariants (the tree holds no uncomputed position).
  bool step_checked() {
    s->step();
    const std::string violation = s->check_invariants();
    EXPECT_EQ(violation, "") << "after step " << s->snapshot().num_steps;
    return violation.empty();
  }
  void drain_checked() {
    for (int i = 0; i < 10000 && s->has_work(); ++i)
      if (!step_checked()) return;
    EXPECT_FALSE(s->has_work());
  }
  void expect_clean() {
    const auto snap = s->snapshot();
    EXPECT_EQ(snap.pages_locked, 0);
    EXPECT_EQ(snap.live_sequences, 0);
    EXPECT_EQ(s->check_invariants(), "");
  }
};

inline std::vector<std::uint64_t> submit_team(Harness& h, int n, int max_tokens, int guidelines = 12) {
  const char* tasks[] = {"Summarise guideline 3.", "Which guideline is about facts?", "Repeat guideline 7.",
                         "How many guidelines are there?"};
  std::vector<std::uint64_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(h.submit(chat_prompt(shared_system(guidelines), tasks[i % 4]), max_tokens));
  return ids;
}

}  // namespace arbor::actors::testing

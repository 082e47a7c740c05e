// Helpers for the runtime tests: small workflows on the real default model.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <atomic>
#include <future>
#include <sstream>
#include <string>

#include "arbor/runtime.hpp"

namespace arbor::testing {

inline const std::string kExamples = std::string(ARBOR_SOURCE_DIR) + "/workflows/examples";

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// An example workflow with every max_tokens lowered to `max_tokens` (so tests stay small)
// and no agent timeouts.
inline std::string example_with_max_tokens(const std::string& name, int max_tokens) {
  auto j = nlohmann::json::parse(read_text(kExamples + "/" + name + ".json"));
  j["defaults"]["generation"]["max_tokens"] = max_tokens;
  std::function<void(nlohmann::json&)> lower = [&](nlohmann::json& agents) {
    for (auto& a : agents) {
      if (a.contains("generation") && a["generation"].contains("max_tokens"))
        a["generation"]["max_tokens"] = max_tokens;
      if (a.contains("agents")) lower(a["agents"]);
      a.erase("timeout_ms");  // these tests check outputs, not deadlines: a slow machine must not fail them
    }
  };
  lower(j["agents"]);
  return j.dump();
}

inline RuntimeConfig small_config() {
  RuntimeConfig c;
  c.model_path = ARBOR_DEFAULT_MODEL;
  c.num_threads = 2;
  c.kv_memory_mb = 64;
  return c;
}

inline std::unique_ptr<Runtime> make_runtime(RuntimeConfig c = small_config()) {
  auto r = Runtime::create(std::move(c));
  EXPECT_TRUE(r) << (r ? "" : r.error().describe());
  return r ? std::move(*r) : nullptr;
}

inline RunResult run_text(Runtime& rt, const std::string& text, const std::map<std::string, std::string>& inputs = {},
                          std::optional<std::string> tenant = std::nullopt) {
  auto h = rt.start(text, {.inputs = inputs,
                           .workflow_is_text = true,
                           .tenant = tenant,
                           .documents = DocumentAccess::local_to(kExamples)});
  EXPECT_TRUE(h) << (h ? "" : h.error().describe());
  if (!h) return {};
  return h->wait();
}

// Starts `workflow` (text), cancels it as soon as its first token streams, and returns
// the run's result (checking that the handle is done).
inline RunResult cancel_at_first_token(Runtime& rt, const std::string& workflow,
                                       const std::map<std::string, std::string>& inputs = {}) {
  std::promise<void> first_token;
  std::atomic<bool> seen{false};
  auto h = rt.start(workflow, {.inputs = inputs,
                               .on_event =
                                   [&](const Event& e) {
                                     if (e.kind == Event::Kind::token && !seen.exchange(true)) first_token.set_value();
                                   },
                               .workflow_is_text = true});
  EXPECT_TRUE(h) << (h ? "" : h.error().describe());
  if (!h) return {};
  first_token.get_future().wait();
  h->cancel();
  RunResult r = h->wait();
  EXPECT_TRUE(h->done());
  return r;
}

// A request of one user message (the chat template adds the model's default system
// message), generating at most `max_tokens`.
inline GenerateRequest user_request(const std::string& text, int max_tokens = SamplingSettings{}.max_tokens) {
  GenerateRequest req;
  req.messages = {{"user", text}};
  req.sampling.max_tokens = max_tokens;
  return req;
}

inline const AgentResult* agent(const RunResult& r, const std::string& id) {
  for (const auto& a : r.agents)
    if (a.id == id) return &a;
  return nullptr;
}

// Two runs of one workflow both ok, every agent with output, the same output in each.
inline void expect_same_outputs(const RunResult& with, const RunResult& without) {
  ASSERT_EQ(with.status, RunStatus::ok) << to_json(with);
  ASSERT_EQ(without.status, RunStatus::ok) << to_json(without);
  ASSERT_EQ(with.agents.size(), without.agents.size());
  for (const auto& a : with.agents) {
    const AgentResult* other = agent(without, a.id);
    ASSERT_TRUE(other) << a.id;
    EXPECT_EQ(a.output, other->output) << a.id;
    EXPECT_GT(a.generated_tokens, 0u) << a.id;
  }
}

// After every case: nothing locked, every cache invariant holds.
inline void expect_clean(Runtime& rt) {
  const auto s = rt.cache_stats();
  EXPECT_EQ(s.pages_locked, 0);
  EXPECT_EQ(s.live_sequences, 0);
  EXPECT_EQ(s.queued_requests, 0);
  EXPECT_EQ(rt.check_invariants(), "");
}

// A fixture with a fresh runtime per case (small_config), checked clean after it.
class CleanRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rt_ = make_runtime();
    ASSERT_TRUE(rt_);
  }
  void TearDown() override {
    if (rt_) expect_clean(*rt_);
  }
  std::unique_ptr<Runtime> rt_;
};

}  // namespace arbor::testing

namespace arbor::testing {

// A workflow written inline: one parent with a shared prefix (inline system text, no
// documents) and `n` children; `extra` is spliced into the defaults object.
inline std::string team_workflow(const std::string& name, const std::string& system, int n, int max_tokens,
                                 const std::string& extra_defaults = "") {
  nlohmann::json j;
  j["name"] = name;
  j["tenant"] = "team";
  nlohmann::json items = nlohmann::json::array();
  const char* topics[] = {"rivers", "mountains", "deserts", "forests", "oceans", "glaciers", "islands", "caves"};
  for (int i = 0; i < n; ++i) items.push_back(topics[i % 8]);
  j["inputs"]["topics"]["default"] = items;
  j["defaults"]["generation"] = {{"max_tokens", max_tokens}, {"temperature", 0}};
  if (!extra_defaults.empty()) j["defaults"].update(nlohmann::json::parse(extra_defaults));
  j["prefixes"]["shared"]["system"] = system;
  j["agents"] = nlohmann::json::array({{{"id", "boss"},
                                        {"prefix", "shared"},
                                        {"agents", nlohmann::json::array({{{"id", "worker"},
                                                                           {"prefix", "shared"},
                                                                           {"for_each", {{"input", "topics"}}},
                                                                           {"task", "Name one fact about {{item}}."}}})},
                                        {"fan_in", "Summarise in one line:\n{{children}}"}}});
  return j.dump();
}

// One lead fanning out to `n` workers with equal prompts and one token of output; its
// fan_in does not read the children (their outputs would not fit a prompt).
inline std::string wide_workflow(int n, const std::string& tenant) {
  nlohmann::json items = nlohmann::json::array();
  for (int i = 0; i < n; ++i) items.push_back("i" + std::to_string(i));
  nlohmann::json wf = {
      {"name", "wide"},
      {"tenant", tenant},
      {"inputs", {{"items", {{"default", items}}}}},
      {"defaults", {{"generation", {{"max_tokens", 1}, {"temperature", 0}}}}},
      {"prefixes", {{"p", {{"system", "You answer every question with one word."}}}}},
      {"agents",
       {{{"id", "lead"},
         {"prefix", "p"},
         {"agents", {{{"id", "w"}, {"prefix", "p"}, {"for_each", {{"input", "items"}}}, {"task", "Say yes."}}}},
         {"fan_in", "Say done."}}}}};
  return wf.dump();
}

inline std::string long_system(const std::string& theme, int sentences) {
  std::string s = "You are a helpful geography tutor. Theme: " + theme + ".";
  for (int i = 0; i < sentences; ++i)
    s += " Rule " + std::to_string(i + 1) + ": answer briefly and mention " + theme + " when it helps.";
  return s;
}

}  // namespace arbor::testing

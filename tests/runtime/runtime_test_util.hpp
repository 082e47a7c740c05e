// Helpers for the runtime tests: small workflows on the real default model.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
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

// An example workflow with every max_tokens lowered to `max_tokens` (so tests stay small).
inline std::string example_with_max_tokens(const std::string& name, int max_tokens) {
  auto j = nlohmann::json::parse(read_text(kExamples + "/" + name + ".json"));
  j["defaults"]["generation"]["max_tokens"] = max_tokens;
  std::function<void(nlohmann::json&)> lower = [&](nlohmann::json& agents) {
    for (auto& a : agents) {
      if (a.contains("generation") && a["generation"].contains("max_tokens"))
        a["generation"]["max_tokens"] = max_tokens;
      if (a.contains("agents")) lower(a["agents"]);
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
  auto h = rt.start(text, inputs, {}, true, tenant, kExamples);
  EXPECT_TRUE(h) << (h ? "" : h.error().describe());
  if (!h) return {};
  return h->wait();
}

inline const AgentResult* agent(const RunResult& r, const std::string& id) {
  for (const auto& a : r.agents)
    if (a.id == id) return &a;
  return nullptr;
}

// After every case: nothing locked, every cache invariant holds.
inline void expect_clean(Runtime& rt) {
  const auto s = rt.cache_stats();
  EXPECT_EQ(s.pages_locked, 0);
  EXPECT_EQ(s.live_sequences, 0);
  EXPECT_EQ(s.queued_requests, 0);
  EXPECT_EQ(rt.check_invariants(), "");
}

}  // namespace arbor::testing

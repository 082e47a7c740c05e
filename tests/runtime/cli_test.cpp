// The `arbor` binary end to end (runtime/cli/): output documents and exit codes on the
// default model. Needs the `arbor` target of the same build tree.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

const std::string kArbor = std::string(ARBOR_BINARY_DIR) + "/arbor";
const std::string kSource = ARBOR_SOURCE_DIR;

struct Output {
  int status = -1;
  std::string out;  // stdout only
};

Output run(const std::string& args) {
  Output o;
  FILE* p = popen((kArbor + " " + args + " 2>/dev/null").c_str(), "r");
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) o.out.append(buf, n);
  const int rc = pclose(p);
  o.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  return o;
}

std::string stderr_of(const std::string& args) {
  std::string out;
  FILE* p = popen((kArbor + " " + args + " 2>&1 >/dev/null").c_str(), "r");
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  pclose(p);
  return out;
}

#define REQUIRE_ARBOR() \
  if (!std::filesystem::exists(kArbor)) GTEST_SKIP() << "build the 'arbor' target to run this test"

TEST(Cli, GenerateJsonHasTheDocumentedFields) {
  REQUIRE_ARBOR();
  const Output o = run("generate --prompt 'What is the capital of France?' --max-tokens 12 --json");
  ASSERT_EQ(o.status, 0);
  const auto j = nlohmann::json::parse(o.out);
  for (const char* key : {"text", "tokens", "prompt_tokens", "cached_tokens", "generated_tokens", "prefill_ms",
                          "decode_ms"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["tokens"].size(), j["generated_tokens"].get<std::size_t>());
  EXPECT_NE(j["text"].get<std::string>().find("Paris"), std::string::npos) << j["text"];
}

TEST(Cli, BadInputExitsTwoWithAClearMessage) {
  REQUIRE_ARBOR();
  const std::string truncated = std::string(ARBOR_BINARY_DIR) + "/cli_truncated.gguf";
  {
    std::ifstream in(ARBOR_DEFAULT_MODEL, std::ios::binary);
    std::ofstream out(truncated, std::ios::binary);
    std::string head(1 << 20, '\0');
    in.read(head.data(), std::streamsize(head.size()));
    out.write(head.data(), in.gcount());
  }
  EXPECT_EQ(run("generate --prompt hi --model " + truncated).status, 2);
  EXPECT_NE(stderr_of("generate --prompt hi --model " + truncated).find("truncated"), std::string::npos);

  std::string words;
  for (int i = 0; i < 9000; ++i) words += "word ";
  EXPECT_EQ(run("generate --max-tokens 4 --prompt '" + words + "'").status, 2);
  EXPECT_NE(stderr_of("generate --max-tokens 4 --prompt '" + words + "'").find("too long"), std::string::npos);

  EXPECT_EQ(run("generate --prompt hi --kv-mem 1 --max-tokens 4").status, 2);
  EXPECT_EQ(run("generate --prompt hi --eviction random").status, 2);
  EXPECT_EQ(run("run").status, 2);
  EXPECT_EQ(run("frobnicate").status, 2);
}

TEST(Cli, RunJsonReportsRunsAndCache) {
  REQUIRE_ARBOR();
  const Output o = run("run " + kSource + "/workflows/examples/tenant_a.json " + kSource +
                       "/workflows/examples/tenant_b.json --json");
  ASSERT_EQ(o.status, 0) << o.out;
  const auto j = nlohmann::json::parse(o.out);
  ASSERT_EQ(j["runs"].size(), 2u);
  for (const auto& r : j["runs"]) {
    EXPECT_EQ(r["status"], "ok");
    for (const auto& a : r["agents"])
      for (const char* key : {"id", "parent", "status", "output", "prompt_tokens", "cached_tokens",
                              "computed_tokens", "generated_tokens", "ttft_ms", "duration_ms"})
        EXPECT_TRUE(a.contains(key)) << key;
  }
  // Identical prefix text in two tenants: each tenant hits only its own pages.
  EXPECT_EQ(j["runs"][0]["agents"][0]["cached_tokens"], 0);
  EXPECT_EQ(j["runs"][1]["agents"][0]["cached_tokens"], 0);
  EXPECT_GT(j["runs"][0]["agents"][1]["cached_tokens"].get<int>(), 0);
  for (const char* key : {"prompt_tokens", "cached_tokens", "computed_tokens", "hit_ratio", "pages_total",
                          "pages_used", "pages_locked", "evictions", "tenants"})
    EXPECT_TRUE(j["cache"].contains(key)) << key;
  EXPECT_EQ(j["cache"]["pages_locked"], 0);
}

TEST(Cli, PerplexityReportsLikeLlamaCpp) {
  REQUIRE_ARBOR();
  const Output o = run("perplexity " + kSource + "/workflows/examples/docs/transistor_history.md --ctx 256");
  ASSERT_EQ(o.status, 0) << o.out;
  const auto at = o.out.find("Final estimate: PPL = ");
  ASSERT_NE(at, std::string::npos) << o.out;
  const double ppl = std::stod(o.out.substr(at + 22));
  EXPECT_GT(ppl, 1.0);
  EXPECT_LT(ppl, 30.0);
}

}  // namespace

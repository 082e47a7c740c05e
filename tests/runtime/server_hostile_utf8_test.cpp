// Model output cut inside a character (max_tokens ends a multi-byte UTF-8 sequence): it
// used to make GET /v1/runs/{id} answer 500 on every call (nlohmann's type_error 316 on
// dump) and `arbor run --json` abort. Every document, stream chunk and event must be
// valid UTF-8, the cut character ending as U+FFFD, and streams must add up to the whole.
//
// tests/data/workflows/utf8_cut.json drives the real model into the cut: SmolLM2 answers
// with star emojis (three byte-level tokens each) and max_tokens 5 ends inside the second.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>

#include "model/unicode.hpp"
#include "runtime/server/server.hpp"
#include "real_server_fixture.hpp"
#include "runtime_test_util.hpp"
#include "server_test_util.hpp"

namespace arbor::server::test {
namespace {

using model::unicode::is_valid_utf8;

const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD
const std::string kWorkflow = std::string(ARBOR_SOURCE_DIR) + "/tests/data/workflows/utf8_cut.json";

bool ends_with_replacement(const std::string& s) {
  return s.size() >= kReplacement.size() &&
         s.compare(s.size() - kReplacement.size(), kReplacement.size(), kReplacement) == 0;
}

class ServerHostileUtf8 : public RealServerTest<ServerHostileUtf8> {
 protected:
  void SetUp() override {
    auto c = parse_server_config(R"({"port":0})");
    ASSERT_TRUE(c.has_value()) << c.error().message;
    start_server(*c);
  }

};

TEST_F(ServerHostileUtf8, RunCutMidCharacterAnswersValidUtf8) {
  nlohmann::json body;
  body["workflow"] = nlohmann::json::parse(arbor::testing::read_text(kWorkflow));
  auto started = request(port_, "POST", "/v1/runs", body.dump());
  ASSERT_EQ(started.status, 202) << started.body;
  const std::string id = started.json()["id"];
  // Followed from the start: token events arrive live.
  auto events = request(port_, "GET", "/v1/runs/" + id + "/events");
  ASSERT_EQ(events.status, 200);
  EXPECT_TRUE(is_valid_utf8(events.body));
  std::string streamed, finished_text;
  for (const auto& p : sse_payloads(events.body)) {
    ASSERT_TRUE(is_valid_utf8(p)) << p;
    if (p == "[DONE]") continue;
    auto j = nlohmann::json::parse(p);  // throws on invalid UTF-8
    if (j["type"] == "token") streamed += j["text"].get<std::string>();
    if (j["type"] == "agent_finished") finished_text = j["text"];
  }

  for (int call = 0; call < 2; ++call) {  // every call, not only the first
    auto doc = request(port_, "GET", "/v1/runs/" + id);
    ASSERT_EQ(doc.status, 200) << doc.body;
    ASSERT_TRUE(is_valid_utf8(doc.body));
    auto j = nlohmann::json::parse(doc.body);
    EXPECT_EQ(j["status"], "ok");
    const std::string output = j["agents"][0]["output"];
    EXPECT_TRUE(ends_with_replacement(output)) << "the cut character ends as U+FFFD: " << output;
    EXPECT_EQ(output, finished_text);
    if (!streamed.empty()) {  // followed live (the replay of a finished run has no tokens)
      EXPECT_EQ(streamed, output);  // the stream adds up to the output
    }
  }
  EXPECT_TRUE(is_valid_utf8(request(port_, "GET", "/v1/runs").body));
  expect_idle();
}

TEST_F(ServerHostileUtf8, ChatStreamChunksAreEachValidAndAddUp) {
  auto wf = nlohmann::json::parse(arbor::testing::read_text(kWorkflow));
  const std::string prompt = wf["agents"][0]["task"];
  const int max_tokens = wf["agents"][0]["generation"]["max_tokens"];
  auto whole = request(port_, "POST", "/v1/chat/completions", chat_body("", prompt, max_tokens));
  ASSERT_EQ(whole.status, 200) << whole.body;
  ASSERT_TRUE(is_valid_utf8(whole.body));
  const std::string content = whole.json()["choices"][0]["message"]["content"];
  EXPECT_TRUE(ends_with_replacement(content)) << content;
  EXPECT_EQ(whole.json()["choices"][0]["finish_reason"], "length");

  auto stream = request(port_, "POST", "/v1/chat/completions", chat_body("", prompt, max_tokens, true));
  ASSERT_EQ(stream.status, 200);
  for (const auto& p : sse_payloads(stream.body)) {
    ASSERT_TRUE(is_valid_utf8(p)) << p;
    if (p != "[DONE]") {
      auto j = nlohmann::json::parse(p);
      if (!j["choices"].empty() && j["choices"][0]["delta"].contains("content")) {
        EXPECT_TRUE(is_valid_utf8(j["choices"][0]["delta"]["content"].get<std::string>()));
      }
    }
  }
  EXPECT_EQ(stream_text(stream.body), content);
  expect_idle();
}

// Defence in depth: should invalid bytes reach a run document, they are replaced, not
// thrown (the server answers 500 on a throw, the CLI aborts).
TEST(ServerHostileUtf8Dump, RunDocumentReplacesInvalidBytes) {
  RunResult r;
  r.run_id = "run-1";
  r.status = RunStatus::ok;
  AgentResult a;
  a.id = "a";
  a.status = AgentStatus::ok;
  a.output = "ok \xF0\x9F";  // half an emoji
  r.agents.push_back(a);
  std::string doc;
  ASSERT_NO_THROW(doc = to_json(r));
  EXPECT_TRUE(is_valid_utf8(doc));
  EXPECT_EQ(nlohmann::json::parse(doc)["agents"][0]["output"].get<std::string>().substr(0, 3), "ok ");
  GenerateResult g;
  g.text = "\xC3";
  ASSERT_NO_THROW(doc = to_json(g));
  EXPECT_TRUE(is_valid_utf8(doc));
}

TEST(ServerHostileUtf8Cli, RunJsonOfACutCharacterExitsZero) {
  const std::string arbor = std::string(ARBOR_BINARY_DIR) + "/arbor";
  if (!std::filesystem::exists(arbor)) GTEST_SKIP() << "build the 'arbor' target to run this test";
  FILE* p = popen((arbor + " run " + kWorkflow + " --json --threads 2 --kv-mem 64 2>/dev/null").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int rc = pclose(p);
  ASSERT_TRUE(WIFEXITED(rc));
  EXPECT_EQ(WEXITSTATUS(rc), 0) << out;
  ASSERT_TRUE(is_valid_utf8(out));
  auto j = nlohmann::json::parse(out);
  EXPECT_TRUE(ends_with_replacement(j["runs"][0]["agents"][0]["output"].get<std::string>())) << out;
}

}  // namespace
}  // namespace arbor::server::test

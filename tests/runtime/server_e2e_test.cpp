// `arbor serve` end to end: the in-process server on a free loopback port over the
// real Runtime and default model, driven by a real Beast client.
#include <gtest/gtest.h>

#include <future>

#include "runtime/server/server.hpp"
#include "real_server_fixture.hpp"
#include "runtime_test_util.hpp"
#include "server_test_util.hpp"

namespace arbor::server::test {
namespace {

constexpr const char* kAlpha = "e2e-key-alpha-1";
constexpr const char* kBeta = "e2e-key-beta-22";
constexpr const char* kAdmin = "e2e-key-admin-3";

// Long enough to fill several 16-token pages, so a second request can reuse them.
const std::string kSystem =
    "You are a concise assistant for a team of researchers studying the history of "
    "electronics. Answer every question in one short sentence, using plain words, and "
    "never add a greeting or a closing remark.";

class ServerE2E : public RealServerTest<ServerE2E> {
 protected:
  void SetUp() override { start(4); }
  void start(int max_inflight) {
    auto c = parse_server_config(std::string(R"({"port":0,"admin_key":")") + kAdmin + R"(","keys":{")" + kAlpha +
                                 R"(":"alpha",")" + kBeta + R"(":"beta"},"limits":{"max_tokens":256,"max_inflight":)" +
                                 std::to_string(max_inflight) + R"(}})");
    ASSERT_TRUE(c.has_value()) << c.error().message;
    c->workflow_dir = arbor::testing::kExamples;
    start_server(*c);
  }

  Reply chat(const std::string& key, const std::string& user, int max_tokens = 8, bool stream = false,
             const std::string& system = kSystem) {
    return request(port_, "POST", "/v1/chat/completions", chat_body(system, user, max_tokens, stream), key);
  }
  int pages_locked() {
    return request(port_, "GET", "/v1/cache/stats", "", kAdmin).json()["global"]["pages_locked"].get<int>();
  }

};

TEST_F(ServerE2E, HealthAndModelsNameTheModel) {
  EXPECT_EQ(request(port_, "GET", "/health").status, 200);
  auto m = request(port_, "GET", "/v1/models", "", kAlpha);
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.json()["data"][0]["id"], runtime_->model_name());
}

TEST_F(ServerE2E, ChatWholeAndStreamedAgree) {
  auto whole = chat(kAlpha, "Who invented the transistor?", 12);
  ASSERT_EQ(whole.status, 200) << whole.body;
  auto j = whole.json();
  const std::string text = j["choices"][0]["message"]["content"];
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  // Greedy decoding: the same request streamed gives the same text, token by token.
  auto streamed = chat(kAlpha, "Who invented the transistor?", 12, true);
  ASSERT_EQ(streamed.status, 200);
  EXPECT_EQ(stream_text(streamed.body), text);
  EXPECT_EQ(sse_payloads(streamed.body).back(), "[DONE]");
  // ...and the same as the runtime called directly.
  GenerateRequest direct;
  direct.tenant = "alpha";
  direct.messages = {{"system", kSystem}, {"user", "Who invented the transistor?"}};
  direct.sampling.max_tokens = 12;
  auto d = runtime_->generate(direct);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->text, text);
}

TEST_F(ServerE2E, CompletionsEndpointUsesARawPrompt) {
  auto r = request(port_, "POST", "/v1/completions", R"({"prompt":"The capital of France is","max_tokens":4})", kAlpha);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["usage"]["completion_tokens"], 4);
}

TEST_F(ServerE2E, SharedSystemPromptHitsTheCacheWithinATenantOnly) {
  const std::string system = kSystem + " Shared-prompt test.";
  auto first = chat(kAlpha, "What is a vacuum tube?", 4, false, system);
  auto second = chat(kAlpha, "What is a diode?", 4, false, system);
  ASSERT_EQ(second.status, 200);
  const int prompt = second.json()["usage"]["prompt_tokens"];
  const int cached = second.json()["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_GT(cached, 32);
  EXPECT_LT(cached, prompt);
  // Another tenant with the very same prompt reads nothing of alpha's cache.
  auto other = chat(kBeta, "What is a diode?", 4, false, system);
  EXPECT_EQ(other.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  auto stats = request(port_, "GET", "/v1/cache/stats", "", kBeta).json();
  EXPECT_EQ(stats["tenants"].size(), 1u);
  EXPECT_FALSE(stats.contains("global"));
  auto tree = request(port_, "GET", "/v1/cache/tree", "", kAlpha).json();
  EXPECT_EQ(tree["tenant"], "alpha");
  EXPECT_FALSE(tree["nodes"].empty());
}

TEST_F(ServerE2E, DisconnectMidStreamFreesThePages) {
  {
    net::io_context ioc;
    beast::tcp_stream stream(connect_loopback(ioc, port_));
    http::request<http::string_body> req(http::verb::post, "/v1/chat/completions", 11);
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::authorization, std::string("Bearer ") + kAlpha);
    req.body() = chat_body(kSystem, "Tell me a long story about transistors.", 256, true);
    req.prepare_payload();
    http::write(stream, req);
    std::string got;
    char buf[2048];
    while (std::count(got.begin(), got.end(), '\n') < 6) {  // the role chunk and two tokens
      beast::error_code ec;
      got.append(buf, stream.socket().read_some(net::buffer(buf), ec));
      ASSERT_FALSE(ec) << ec.message();
    }
  }
  EXPECT_TRUE(eventually([&] { return server_->api().inflight() == 0; }));
  EXPECT_TRUE(eventually([&] { return pages_locked() == 0; }));
  const auto stats = runtime_->cache_stats();
  EXPECT_EQ(stats.live_sequences, 0);
  EXPECT_EQ(runtime_->check_invariants(), "");
}

TEST_F(ServerE2E, ConcurrentStreamingClientsGetTheirOwnOutputs) {
  start(16);
  constexpr int kClients = 8;
  auto question = [](int i) { return "Question " + std::to_string(i) + ": name one use of transistor number " + std::to_string(i) + "."; };
  // References, one at a time.
  std::vector<std::string> expected;
  for (int i = 0; i < kClients; ++i) {
    auto r = chat(i % 2 ? kAlpha : kBeta, question(i), 10);
    ASSERT_EQ(r.status, 200);
    expected.push_back(r.json()["choices"][0]["message"]["content"]);
  }
  std::vector<std::future<Reply>> replies;
  for (int i = 0; i < kClients; ++i)
    replies.push_back(std::async(std::launch::async, [&, i] { return chat(i % 2 ? kAlpha : kBeta, question(i), 10, true); }));
  for (int i = 0; i < kClients; ++i) {
    auto r = replies[i].get();
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(sse_payloads(r.body).back(), "[DONE]");
    EXPECT_EQ(stream_text(r.body), expected[i]) << "client " << i;
  }
  EXPECT_TRUE(eventually([&] { return pages_locked() == 0; }));
}

TEST_F(ServerE2E, OverloadIsRefusedAtOnce) {
  start(2);
  std::vector<std::future<Reply>> held;
  for (int i = 0; i < 2; ++i)
    held.push_back(std::async(std::launch::async, [&, i] { return chat(kAlpha, "Story " + std::to_string(i), 256, true); }));
  ASSERT_TRUE(eventually([&] { return server_->api().inflight() == 2; }));
  auto refused = chat(kBeta, "one more", 4);
  EXPECT_EQ(refused.status, 503);
  EXPECT_EQ(refused.json()["error"]["code"], "overloaded");
  for (auto& f : held) EXPECT_EQ(f.get().status, 200);
}

TEST_F(ServerE2E, WorkflowRunOverHttpMatchesTheRunDocument) {
  nlohmann::json body;
  body["workflow"] = nlohmann::json::parse(arbor::testing::example_with_max_tokens("research_team", 4));
  body["inputs"] = {{"questions", {"Who built the first transistor?", "What is a MOSFET?"}}};
  auto started = request(port_, "POST", "/v1/runs", body.dump(), kAlpha);
  ASSERT_EQ(started.status, 202) << started.body;
  const std::string id = started.json()["id"];
  auto events = request(port_, "GET", "/v1/runs/" + id + "/events", "", kAlpha);
  ASSERT_EQ(events.status, 200);
  auto payloads = sse_payloads(events.body);
  ASSERT_GE(payloads.size(), 4u);
  EXPECT_EQ(payloads.back(), "[DONE]");
  EXPECT_EQ(nlohmann::json::parse(payloads.front())["type"], "run_started");
  auto finished = nlohmann::json::parse(payloads[payloads.size() - 2]);
  EXPECT_EQ(finished["type"], "run_finished");
  EXPECT_EQ(finished["status"], "ok");
  int agent_started = 0;
  for (const auto& p : payloads)
    if (p != "[DONE]") agent_started += nlohmann::json::parse(p)["type"] == "agent_started";
  EXPECT_EQ(agent_started, 3);  // the lead and two researchers

  auto doc = request(port_, "GET", "/v1/runs/" + id, "", kAlpha);
  ASSERT_EQ(doc.status, 200);
  auto j = doc.json();
  EXPECT_EQ(j["status"], "ok");
  EXPECT_EQ(j["tenant"], "alpha");  // from the key, not the document's "demo"
  EXPECT_EQ(j["agents"].size(), 3u);
  EXPECT_EQ(request(port_, "GET", "/v1/runs/" + id, "", kBeta).status, 404);
  auto metrics = request(port_, "GET", "/metrics", "", kAdmin).body;
  EXPECT_NE(metrics.find("arbor_runs_total{tenant=\"alpha\"}"), std::string::npos);

  auto escape = body;
  escape["workflow"]["prefixes"]["background"]["documents"][0]["file"] = "../../../etc/passwd";
  EXPECT_EQ(request(port_, "POST", "/v1/runs", escape.dump(), kAlpha).status, 400);
}

// The runs SSE stream carries each tool call (name, arguments) before its result
// (status, ms, bytes).
TEST_F(ServerE2E, RunEventsStreamToolCallsAndResults) {
  nlohmann::json body;
  body["workflow"] = nlohmann::json::parse(arbor::testing::example_with_max_tokens("tool_calculator", 24));
  body["inputs"] = {{"orders", {"7 chairs at 49.90 each"}}};
  auto started = request(port_, "POST", "/v1/runs", body.dump(), kAlpha);
  ASSERT_EQ(started.status, 202) << started.body;
  auto events = request(port_, "GET", "/v1/runs/" + started.json()["id"].get<std::string>() + "/events", "", kAlpha);
  ASSERT_EQ(events.status, 200);
  std::vector<nlohmann::json> tool;
  for (const auto& p : sse_payloads(events.body)) {
    if (p == "[DONE]") continue;
    auto j = nlohmann::json::parse(p);
    if (j["type"] == "tool_call" || j["type"] == "tool_result") tool.push_back(j);
  }
  ASSERT_GE(tool.size(), 2u);
  EXPECT_EQ(tool[0]["type"], "tool_call");
  EXPECT_EQ(tool[0]["agent_id"], "order[0]");
  EXPECT_EQ(tool[0]["tool"], "calculator");
  EXPECT_TRUE(tool[0]["arguments"].contains("expression")) << tool[0].dump();
  EXPECT_EQ(tool[1]["type"], "tool_result");
  EXPECT_EQ(tool[1]["tool"], "calculator");
  EXPECT_TRUE(tool[1]["status"] == "ok" || tool[1]["status"] == "error") << tool[1].dump();
  EXPECT_GT(tool[1]["bytes"].get<int>(), 0);
  EXPECT_TRUE(tool[1]["ms"].is_number());
}

TEST_F(ServerE2E, DeleteCancelsARunAndFreesItsPages) {
  nlohmann::json body;
  body["workflow"] = nlohmann::json::parse(arbor::testing::example_with_max_tokens("research_team", 200));
  auto started = request(port_, "POST", "/v1/runs", body.dump(), kBeta);
  ASSERT_EQ(started.status, 202) << started.body;
  const std::string id = started.json()["id"];
  EXPECT_EQ(request(port_, "DELETE", "/v1/runs/" + id, "", kBeta).status, 200);
  EXPECT_TRUE(eventually([&] { return request(port_, "GET", "/v1/runs/" + id, "", kBeta).json()["status"] == "cancelled"; }, 60));
  EXPECT_TRUE(eventually([&] { return pages_locked() == 0; }));
  EXPECT_TRUE(eventually([&] { return server_->api().inflight() == 0; }));
}

TEST_F(ServerE2E, StopCancelsStreamsWhichStillEndCleanly) {
  auto config = parse_server_config(R"({"port":0,"limits":{"drain_seconds":0}})");
  ASSERT_TRUE(config.has_value());
  start_server(*config);
  const std::uint64_t generated_before = runtime_->cache_stats().generated_tokens;
  auto held = std::async(std::launch::async, [&] { return chat("", "Tell me a long story.", 256, true); });
  // The stream is open once a token has gone to it (before that, a stop is a 503: the
  // generation was cancelled before its reply began). The cache actor answers the stats
  // after the step whose token callbacks opened it.
  ASSERT_TRUE(eventually(
      [&] { return server_->api().inflight() == 1 && runtime_->cache_stats().generated_tokens > generated_before; }));
  server_->stop();
  auto r = held.get();
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_FALSE(sse_payloads(r.body).empty()) << r.body;
  EXPECT_EQ(sse_payloads(r.body).back(), "[DONE]");
  EXPECT_EQ(server_->api().inflight(), 0);
  EXPECT_EQ(runtime_->cache_stats().pages_locked, 0);
}

// response_format: the request's body with a json_schema whose properties are written
// "zeta" before "alpha" (so the written order, not the alphabetical one, must survive).
std::string json_schema_body(int max_tokens, bool stream) {
  return std::string(R"({"model":"m","max_tokens":)") + std::to_string(max_tokens) + (stream ? R"(,"stream":true)" : "") +
         R"(,"temperature":0,"messages":[{"role":"user","content":"Give me a code word and a colour as JSON."}],
  "response_format":{"type":"json_schema","json_schema":{"name":"pair","strict":true,"schema":
  {"type":"object","properties":{"zeta":{"type":"string","maxLength":12},"alpha":{"enum":["red","green","blue"]}},
   "required":["zeta","alpha"],"additionalProperties":false}}}})";
}

TEST_F(ServerE2E, ResponseFormatJsonSchemaWholeAndStreamedGiveOneValidDocument) {
  auto whole = request(port_, "POST", "/v1/chat/completions", json_schema_body(64, false), kAlpha);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const std::string content = whole.json()["choices"][0]["message"]["content"];
  EXPECT_EQ(whole.json()["choices"][0]["finish_reason"], "stop");
  const auto doc = nlohmann::ordered_json::parse(content, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << content;
  ASSERT_EQ(doc.size(), 2u) << content;
  EXPECT_EQ(doc.begin().key(), "zeta") << content;  // the schema's order, not the alphabet's
  EXPECT_TRUE(doc["zeta"].is_string() && doc["zeta"].get<std::string>().size() <= 12 * 4) << content;
  const std::string colour = doc["alpha"];
  EXPECT_TRUE(colour == "red" || colour == "green" || colour == "blue") << content;
  auto streamed = request(port_, "POST", "/v1/chat/completions", json_schema_body(64, true), kAlpha);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_EQ(stream_text(streamed.body), content);
  EXPECT_EQ(sse_payloads(streamed.body).back(), "[DONE]");
  // json_object on /v1/completions: any JSON object.
  auto object = request(port_, "POST", "/v1/completions",
                        R"({"prompt":"A JSON object describing a cat: ","max_tokens":48,"temperature":0,
                            "response_format":{"type":"json_object"}})", kAlpha);
  ASSERT_EQ(object.status, 200) << object.body;
  const std::string text = object.json()["choices"][0]["text"];
  if (object.json()["choices"][0]["finish_reason"] == "stop") {
    EXPECT_TRUE(nlohmann::json::parse(text, nullptr, false).is_object()) << text;
  } else {  // cut by max_tokens: still the beginning of an object
    EXPECT_EQ(text.substr(0, 1), "{") << text;
  }
  EXPECT_EQ(pages_locked(), 0);
}

TEST_F(ServerE2E, ResponseFormatTheServerCannotEnforceIs400NamingThePointer) {
  auto bad = request(port_, "POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"n"}],
      "response_format":{"type":"json_schema","json_schema":{"name":"n","schema":
      {"type":"object","properties":{"n":{"type":"integer","multipleOf":3}}}}}})", kAlpha);
  ASSERT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(bad.json()["error"]["param"], "/response_format/json_schema/schema/properties/n/multipleOf");
  EXPECT_NE(bad.json()["error"]["message"].get<std::string>().find("multipleOf"), std::string::npos) << bad.body;
  auto no_schema = request(port_, "POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"n"}],
      "response_format":{"type":"json_schema","json_schema":{"name":"n"}}})", kAlpha);
  ASSERT_EQ(no_schema.status, 400) << no_schema.body;
  EXPECT_EQ(no_schema.json()["error"]["param"], "/response_format/json_schema/schema");
  auto unknown = request(port_, "POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"n"}],
      "response_format":{"type":"yaml"}})", kAlpha);
  ASSERT_EQ(unknown.status, 400) << unknown.body;
  EXPECT_EQ(unknown.json()["error"]["param"], "/response_format/type");
  auto text = request(port_, "POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"Hi"}],
      "max_tokens":4,"response_format":{"type":"text"}})", kAlpha);
  EXPECT_EQ(text.status, 200) << text.body;
}

}  // namespace
}  // namespace arbor::server::test

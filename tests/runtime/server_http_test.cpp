// The HTTP layer over a scripted backend (FakeBackend): real sockets on loopback, a
// real Beast client. Covers routing, auth and tenant isolation, every error status,
// streaming framing, client disconnect, overload, concurrency and shutdown.
#include <gtest/gtest.h>

#include <future>

#include "runtime/server/server.hpp"
#include "server_test_util.hpp"

namespace arbor::server::test {
namespace {

constexpr const char* kAlpha = "key-alpha-0001";
constexpr const char* kBeta = "key-beta-00002";
constexpr const char* kAdmin = "key-admin-0003";

ServerConfig auth_config() {
  auto c = parse_server_config(std::string(R"({"port":0,"admin_key":")") + kAdmin + R"(",
      "keys":{")" + kAlpha + R"(":"alpha",")" + kBeta + R"(":"beta"},
      "tenants":{"alpha":{"max_concurrent":2}},
      "limits":{"max_body_bytes":4096,"max_inflight":4,"max_tokens":64,"drain_seconds":5}})");
  EXPECT_TRUE(c.has_value()) << c.error().message;
  return *c;
}

class ServerHttp : public ::testing::Test {
 protected:
  void SetUp() override { start(auth_config()); }
  void start(const ServerConfig& config) {
    auto s = Server::start(config, backend_);
    ASSERT_TRUE(s.has_value()) << s.error().message;
    server_ = std::move(*s);
    port_ = server_->port();
  }
  void TearDown() override {
    backend_.release_all();
    server_.reset();
  }
  Reply chat(const std::string& key, const std::string& user, bool stream = false, const std::string& system = "") {
    return request(port_, "POST", "/v1/chat/completions", chat_body(system, user, 16, stream), key);
  }

  FakeBackend backend_;
  std::unique_ptr<Server> server_;
  int port_ = 0;
};

TEST_F(ServerHttp, HealthAndModels) {
  auto h = request(port_, "GET", "/health");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(h.json()["status"], "ok");
  auto m = request(port_, "GET", "/v1/models", "", kAlpha);
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_EQ(m.json()["object"], "list");
  EXPECT_EQ(m.json()["data"][0]["id"], "fake-model");
}

TEST_F(ServerHttp, ChatCompletionWhole) {
  auto r = chat(kAlpha, "hello there world");
  ASSERT_EQ(r.status, 200) << r.body;
  auto j = r.json();
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "HELLO THERE WORLD");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(r.headers["Content-Type"], "application/json");
}

TEST_F(ServerHttp, CompletionsEndpoint) {
  auto r = request(port_, "POST", "/v1/completions", R"({"prompt":"one two","max_tokens":1})", kAlpha);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["object"], "text_completion");
  EXPECT_EQ(r.json()["choices"][0]["text"], "ONE");
}

TEST_F(ServerHttp, ChatCompletionStreamFraming) {
  auto r = chat(kAlpha, "a b c d", true);
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["Content-Type"], "text/event-stream");
  auto payloads = sse_payloads(r.body);
  ASSERT_GE(payloads.size(), 3u);
  EXPECT_EQ(payloads.back(), "[DONE]");
  auto first = nlohmann::json::parse(payloads.front());
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  auto last = nlohmann::json::parse(payloads[payloads.size() - 2]);
  EXPECT_EQ(last["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(last["usage"]["completion_tokens"], 4);
  EXPECT_EQ(stream_text(r.body), "A B C D");
  // Every event is "data: <json>" then a blank line.
  EXPECT_EQ(r.body.substr(r.body.size() - 14), "data: [DONE]\n\n");
}

TEST_F(ServerHttp, StreamIncludeUsageChunk) {
  nlohmann::json b = nlohmann::json::parse(chat_body("", "x y", 8, true));
  b["stream_options"] = {{"include_usage", true}};
  auto r = request(port_, "POST", "/v1/chat/completions", b.dump(), kAlpha);
  auto payloads = sse_payloads(r.body);
  ASSERT_GE(payloads.size(), 3u);
  auto usage = nlohmann::json::parse(payloads[payloads.size() - 2]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 2);
}

TEST_F(ServerHttp, SharedSystemPromptIsCachedWithinATenantOnly) {
  const std::string system = "You are a careful assistant.";
  auto a1 = chat(kAlpha, "first", false, system);
  auto a2 = chat(kAlpha, "second", false, system);
  auto b1 = chat(kBeta, "third", false, system);
  EXPECT_EQ(a1.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(a2.json()["usage"]["prompt_tokens_details"]["cached_tokens"], system.size());
  EXPECT_EQ(b1.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST_F(ServerHttp, AuthMissingOrUnknownKeyIs401) {
  for (const std::string key : {"", "key-nobody-999"}) {
    auto r = request(port_, "POST", "/v1/chat/completions", chat_body("", "x", 4), key);
    EXPECT_EQ(r.status, 401) << key;
    EXPECT_EQ(r.json()["error"]["type"], "authentication_error");
    EXPECT_EQ(r.headers["WWW-Authenticate"], "Bearer");
  }
  EXPECT_EQ(request(port_, "GET", "/v1/cache/stats").status, 401);
  EXPECT_EQ(request(port_, "GET", "/metrics", "", "wrong-key-12345").status, 401);
  EXPECT_EQ(backend_.num_started, 0);
}

TEST_F(ServerHttp, ErrorStatuses) {
  auto malformed = request(port_, "POST", "/v1/chat/completions", "{\"messages\": [\n  {\"role\": }", kAlpha);
  EXPECT_EQ(malformed.status, 400);
  EXPECT_EQ(malformed.json()["error"]["code"], "invalid_json");
  EXPECT_NE(malformed.json()["error"]["message"].get<std::string>().find("line 2, column"), std::string::npos);

  auto param = request(port_, "POST", "/v1/chat/completions",
                       R"({"messages":[{"role":"user","content":"x"}],"temperature":-1})", kAlpha);
  EXPECT_EQ(param.status, 400);
  EXPECT_EQ(param.json()["error"]["param"], "/temperature");
  auto over_cap = request(port_, "POST", "/v1/chat/completions", chat_body("", "x", 65), kAlpha);
  EXPECT_EQ(over_cap.status, 400);

  auto missing = request(port_, "GET", "/v1/nothing", "", kAlpha);
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.json()["error"]["type"], "not_found_error");

  auto method = request(port_, "GET", "/v1/chat/completions", "", kAlpha);
  EXPECT_EQ(method.status, 405);
  EXPECT_EQ(method.headers["Allow"], "POST");
  EXPECT_EQ(request(port_, "PUT", "/v1/runs", "{}", kAlpha).status, 405);

  auto big = request(port_, "POST", "/v1/chat/completions", chat_body("", std::string(5000, 'x'), 4), kAlpha);
  EXPECT_EQ(big.status, 413);
  EXPECT_EQ(big.json()["error"]["code"], "payload_too_large");

  auto refused = request(port_, "POST", "/v1/chat/completions", chat_body("", "FAIL", 4), kAlpha);
  EXPECT_EQ(refused.status, 503);  // the backend's admission queue is full
  EXPECT_EQ(backend_.num_started, 0);
  EXPECT_EQ(server_->api().inflight(), 0);
}

TEST_F(ServerHttp, GarbageNeverCrashesTheServer) {
  const std::string inputs[] = {
      "GARBAGE\r\n\r\n",
      "GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n",
      std::string("GET /") + std::string(20000, 'a') + " HTTP/1.1\r\n\r\n",
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-alpha-0001\r\n"
      "Connection: close\r\nContent-Length: 11\r\n\r\n\xff\xfe{\"a\":\"\xc3\"}",
  };
  for (const auto& in : inputs) {
    const std::string out = raw_exchange(port_, in);
    EXPECT_TRUE(out.empty() || out.rfind("HTTP/1.1 4", 0) == 0) << out.substr(0, 200);
  }
  EXPECT_EQ(raw_exchange(port_, inputs[3]).substr(0, 12), "HTTP/1.1 413");
  EXPECT_EQ(request(port_, "GET", "/health").status, 200);
}

TEST_F(ServerHttp, KeepAliveServesSeveralRequestsOnOneConnection) {
  const std::string one = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  const std::string out = raw_exchange(port_, one + one + "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::size_t n = 0;
  for (std::size_t p = 0; (p = out.find("HTTP/1.1 200", p)) != std::string::npos; ++p) ++n;
  EXPECT_EQ(n, 3u) << out;
}

TEST_F(ServerHttp, DisconnectMidStreamCancelsTheGeneration) {
  backend_.hold = true;
  {
    net::io_context ioc;
    beast::tcp_stream stream(connect_loopback(ioc, port_));
    http::request<http::string_body> req(http::verb::post, "/v1/chat/completions", 11);
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::authorization, std::string("Bearer ") + kAlpha);
    req.body() = chat_body("", "one two three", 8, true);
    req.prepare_payload();
    http::write(stream, req);
    // Read until the first content token arrives, then hang up.
    std::string got;
    char buf[1024];
    while (got.find("ONE") == std::string::npos) {
      beast::error_code ec;
      const auto n = stream.socket().read_some(net::buffer(buf), ec);
      ASSERT_FALSE(ec) << ec.message();
      got.append(buf, n);
    }
    EXPECT_EQ(backend_.num_live, 1);
  }
  EXPECT_TRUE(eventually([&] { return backend_.num_cancelled == 1 && backend_.num_live == 0; }));
  EXPECT_TRUE(eventually([&] { return server_->api().inflight() == 0; }));
  // The cache's locked pages (the fake reports one per live generation) are back to 0.
  auto stats = request(port_, "GET", "/v1/cache/stats", "", kAdmin);
  EXPECT_EQ(stats.json()["global"]["pages_locked"], 0);
}

TEST_F(ServerHttp, DisconnectWhileWaitingForAWholeReplyCancelsToo) {
  backend_.hold = true;
  {
    net::io_context ioc;
    beast::tcp_stream stream(connect_loopback(ioc, port_));
    const std::string body = chat_body("", "alpha beta", 8, false);
    const std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                            std::string(kAlpha) + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    net::write(stream, net::buffer(req));
    ASSERT_TRUE(eventually([&] { return backend_.num_live == 1; }));
  }
  EXPECT_TRUE(eventually([&] { return backend_.num_cancelled == 1 && server_->api().inflight() == 0; }));
}

TEST_F(ServerHttp, OverloadIsAnsweredWith429And503NotAHang) {
  backend_.hold = true;
  // alpha may have 2 in flight: its third gets 429 at once.
  std::vector<std::future<Reply>> held;
  for (int i = 0; i < 2; ++i)
    held.push_back(std::async(std::launch::async, [&] { return chat(kAlpha, "held request", true); }));
  ASSERT_TRUE(eventually([&] { return backend_.num_live == 2; }));
  auto third = chat(kAlpha, "one more");
  EXPECT_EQ(third.status, 429);
  EXPECT_EQ(third.json()["error"]["code"], "rate_limit_exceeded");
  EXPECT_EQ(third.headers["Retry-After"], "1");
  // The server holds 4 at most: 2 more from beta fill it, the next gets 503.
  for (int i = 0; i < 2; ++i)
    held.push_back(std::async(std::launch::async, [&] { return chat(kBeta, "held request", true); }));
  ASSERT_TRUE(eventually([&] { return backend_.num_live == 4; }));
  auto fifth = chat(kBeta, "one more");
  EXPECT_EQ(fifth.status, 503);
  backend_.release_all();
  for (auto& f : held) {
    auto r = f.get();
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(stream_text(r.body), "HELD REQUEST");
  }
  EXPECT_EQ(server_->api().inflight(), 0);
  EXPECT_EQ(chat(kAlpha, "after").status, 200);
}

TEST_F(ServerHttp, ConcurrentStreamsAreIndependent) {
  ServerConfig c = auth_config();
  c.max_inflight = 64;
  c.tenant_limits.clear();
  server_.reset();
  start(c);
  constexpr int kClients = 16;
  std::vector<std::future<Reply>> replies;
  for (int i = 0; i < kClients; ++i)
    replies.push_back(std::async(std::launch::async, [&, i] {
      return chat(i % 2 ? kAlpha : kBeta, "client " + std::to_string(i) + " says hi", true);
    }));
  for (int i = 0; i < kClients; ++i) {
    auto r = replies[i].get();
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(stream_text(r.body), "CLIENT " + std::to_string(i) + " SAYS HI");
    EXPECT_EQ(sse_payloads(r.body).back(), "[DONE]");
  }
}

TEST_F(ServerHttp, RunsAreIsolatedByTenant) {
  auto bad = request(port_, "POST", "/v1/runs", R"({"workflow":{"name":"x"}})", kAlpha);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.json()["error"]["code"], "invalid_workflow");
  EXPECT_EQ(request(port_, "POST", "/v1/runs", R"({"inputs":{}})", kAlpha).status, 400);

  auto started = request(port_, "POST", "/v1/runs",
                         R"({"workflow":{"name":"w","tenant":"beta","agents":[]},"inputs":{"n":3,"s":"x"}})", kAlpha);
  ASSERT_EQ(started.status, 202) << started.body;
  const std::string id = started.json()["id"];
  EXPECT_EQ(started.json()["tenant"], "alpha");  // from the key, not the document
  ASSERT_TRUE(eventually([&] { return request(port_, "GET", "/v1/runs/" + id, "", kAlpha).json()["status"] == "ok"; }));
  auto mine = request(port_, "GET", "/v1/runs/" + id, "", kAlpha);
  EXPECT_EQ(mine.json()["tenant"], "alpha");
  EXPECT_EQ(request(port_, "GET", "/v1/runs/" + id, "", kBeta).status, 404);
  EXPECT_EQ(request(port_, "GET", "/v1/runs/" + id + "/events", "", kBeta).status, 404);
  EXPECT_EQ(request(port_, "DELETE", "/v1/runs/" + id, "", kBeta).status, 404);
  EXPECT_EQ(request(port_, "GET", "/v1/runs/" + id, "", kAdmin).status, 200);
  EXPECT_EQ(request(port_, "GET", "/v1/runs", "", kBeta).json()["data"].size(), 0u);
  EXPECT_EQ(request(port_, "GET", "/v1/runs", "", kAdmin).json()["data"].size(), 1u);

  // A finished run replays its lifecycle (its tokens are in agent_finished).
  auto events = request(port_, "GET", "/v1/runs/" + id + "/events", "", kAlpha);
  ASSERT_EQ(events.status, 200);
  auto payloads = sse_payloads(events.body);
  ASSERT_EQ(payloads.size(), 5u) << events.body;
  EXPECT_EQ(nlohmann::json::parse(payloads[0])["type"], "run_started");
  EXPECT_EQ(nlohmann::json::parse(payloads[2])["text"], "hello");
  auto finished = nlohmann::json::parse(payloads[3]);
  EXPECT_EQ(finished["type"], "run_finished");
  EXPECT_EQ(finished["cache"]["tenants"].size(), 1u);  // only the run's tenant
  EXPECT_TRUE(finished["cache"]["tenants"].contains("alpha"));
  EXPECT_EQ(payloads.back(), "[DONE]");
  EXPECT_TRUE(eventually([&] { return server_->api().inflight() == 0; }));  // settled off the event's thread
}

TEST_F(ServerHttp, RunEventsStreamLiveAndDeleteCancels) {
  backend_.hold = true;
  auto started = request(port_, "POST", "/v1/runs", R"({"workflow":"{\"agents\":[]}"})", kBeta);
  ASSERT_EQ(started.status, 202) << started.body;
  const std::string id = started.json()["id"];
  auto follower = std::async(std::launch::async, [&] { return request(port_, "GET", "/v1/runs/" + id + "/events", "", kBeta); });
  EXPECT_EQ(request(port_, "GET", "/v1/runs/" + id, "", kBeta).json()["status"], "running");
  auto del = request(port_, "DELETE", "/v1/runs/" + id, "", kBeta);
  EXPECT_EQ(del.status, 200);
  auto events = follower.get();
  auto payloads = sse_payloads(events.body);
  ASSERT_FALSE(payloads.empty());
  EXPECT_EQ(payloads.back(), "[DONE]");
  EXPECT_TRUE(eventually([&] { return request(port_, "GET", "/v1/runs/" + id, "", kBeta).json()["status"] == "cancelled"; }));
  EXPECT_TRUE(eventually([&] { return server_->api().inflight() == 0; }));
}

TEST_F(ServerHttp, StatsTreeAndMetricsAreScopedToTheCaller) {
  ASSERT_EQ(chat(kAlpha, "x y").status, 200);
  auto mine = request(port_, "GET", "/v1/cache/stats", "", kBeta).json();
  EXPECT_FALSE(mine.contains("global"));
  EXPECT_EQ(mine["tenants"].size(), 1u);
  EXPECT_TRUE(mine["tenants"].contains("beta"));
  EXPECT_FALSE(mine["served"].contains("alpha"));
  auto all = request(port_, "GET", "/v1/cache/stats", "", kAdmin).json();
  EXPECT_TRUE(all.contains("global"));
  EXPECT_EQ(all["served"]["alpha"]["generated_tokens"], 2);

  auto tree = request(port_, "GET", "/v1/cache/tree?tenant=alpha", "", kBeta).json();
  EXPECT_EQ(tree["tenant"], "beta");  // a tenant cannot ask for another's tree
  EXPECT_EQ(tree["nodes"][0]["snippet"], "tree of beta");
  EXPECT_EQ(request(port_, "GET", "/v1/cache/tree?tenant=alpha", "", kAdmin).json()["tenant"], "alpha");
  EXPECT_EQ(request(port_, "GET", "/v1/cache/tree?max_nodes=0", "", kBeta).status, 400);

  auto metrics = request(port_, "GET", "/metrics", "", kBeta);
  EXPECT_EQ(metrics.status, 200);
  EXPECT_EQ(metrics.body.find("alpha"), std::string::npos);
  auto admin_metrics = request(port_, "GET", "/metrics", "", kAdmin);
  EXPECT_NE(admin_metrics.body.find("arbor_generated_tokens_total{tenant=\"alpha\"} 2"), std::string::npos);
  EXPECT_NE(admin_metrics.headers["Content-Type"].find("text/plain"), std::string::npos);
}

TEST_F(ServerHttp, ClusterNodesAreShownToAnAdminOnly) {
  EXPECT_FALSE(request(port_, "GET", "/v1/cache/stats", "", kAdmin).json().contains("nodes"));  // no cluster
  const std::string nodes = R"([{"node":"127.0.0.1:7001","up":true,"inflight":2},{"node":"127.0.0.1:7002","up":false}])";
  backend_.set_nodes(nodes);
  auto admin = request(port_, "GET", "/v1/cache/stats", "", kAdmin).json();
  EXPECT_EQ(admin["nodes"], nlohmann::json::parse(nodes));
  EXPECT_FALSE(request(port_, "GET", "/v1/cache/stats", "", kAlpha).json().contains("nodes"));
}

TEST_F(ServerHttp, DashboardIsSelfContained) {
  auto r = request(port_, "GET", "/");
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(r.headers["Content-Type"].find("text/html"), std::string::npos);
  EXPECT_NE(r.body.find("/v1/cache/tree"), std::string::npos);
  EXPECT_EQ(r.body.find("src=\"http"), std::string::npos);
  EXPECT_EQ(r.body.find("href=\"http"), std::string::npos);
}

TEST_F(ServerHttp, NoConfigMeansOneDefaultTenantWithoutAuth) {
  server_.reset();
  ServerConfig c;
  c.port = 0;
  start(c);
  auto r = chat("", "open door");
  ASSERT_EQ(r.status, 200);
  auto stats = request(port_, "GET", "/v1/cache/stats").json();
  EXPECT_TRUE(stats["served"].contains("default"));
}

TEST_F(ServerHttp, StopDrainsThenCancelsInFlightWork) {
  server_.reset();
  ServerConfig c = auth_config();
  c.drain_seconds = 0.2;
  start(c);
  backend_.hold = true;
  auto held = std::async(std::launch::async, [&] { return chat(kAlpha, "never finishes", true); });
  ASSERT_TRUE(eventually([&] { return backend_.num_live == 1; }));
  server_->stop();  // drains 0.2 s, then cancels; the stream still ends properly
  auto r = held.get();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(sse_payloads(r.body).back(), "[DONE]");
  EXPECT_EQ(backend_.num_cancelled, 1);
  EXPECT_EQ(backend_.num_live, 0);
}

}  // namespace
}  // namespace arbor::server::test

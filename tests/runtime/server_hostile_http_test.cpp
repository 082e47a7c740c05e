// The HTTP connection under clients that do more than one polite request at a time:
// pipelined requests (and stray empty lines) on one connection, half-closes, hang-ups
// and resets while a generation runs, and shutdown (SIGTERM on the real `arbor serve`)
// with work in flight. Each test checks the answers on the wire and that the server
// is idle afterwards: no request in flight, no locked page, no live sequence.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>

#include "real_server_fixture.hpp"
#include "runtime/cli/child_process.hpp"
#include "runtime/server/server.hpp"
#include "runtime_test_util.hpp"
#include "server_test_util.hpp"

namespace arbor::server::test {
namespace {

using namespace std::chrono_literals;

std::string post(const std::string& target, const std::string& body, const std::string& headers = "") {
  return "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}
std::string get(const std::string& target, const std::string& headers = "") {
  return "GET " + target + " HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n";
}
std::string chat(const std::string& user, int max_tokens, bool stream, const std::string& headers = "") {
  return post("/v1/chat/completions", chat_body("", user, max_tokens, stream), headers);
}

// One raw client connection: writes bytes as given, reads responses one by one (an
// interim 1xx is a response of its own) from everything read so far.
class Client {
 public:
  explicit Client(int port) : stream_(connect_loopback(ioc_, port)) {
    stream_.expires_after(std::chrono::seconds(120));  // a hung server fails the test, never hangs it
  }
  void send(const std::string& bytes) { net::write(stream_, net::buffer(bytes)); }
  // Reads until `text` is among the bytes received; false if the server closes first.
  bool wait_for(const std::string& text) {
    while (beast::buffers_to_string(buffer_.data()).find(text) == std::string::npos)
      if (!read_some()) return false;
    return true;
  }
  Reply next() {
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 << 20);
    beast::error_code ec;
    http::read(stream_, buffer_, parser, ec);
    Reply r;
    if (ec) {
      r.status = -1;
      r.body = ec.message() + " after: " + parser.get().body();
      return r;
    }
    r.status = parser.get().result_int();
    r.body = parser.get().body();
    for (const auto& f : parser.get()) r.headers[std::string(f.name_string())] = std::string(f.value());
    return r;
  }
  Reply next_final() {
    Reply r = next();
    while (r.status >= 100 && r.status < 200) r = next();
    return r;
  }
  // Whether the server closed the connection with nothing more to read.
  bool closed_by_server() { return buffer_.size() == 0 && !read_some() && buffer_.size() == 0; }
  void half_close() { stream_.socket().shutdown(tcp::socket::shutdown_send); }
  void reset() {
    stream_.socket().set_option(net::socket_base::linger(true, 0));
    stream_.close();
  }

 private:
  bool read_some() {
    beast::error_code ec;
    buffer_.commit(stream_.read_some(buffer_.prepare(4096), ec));
    return !ec;
  }
  net::io_context ioc_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
};

std::string content(const Reply& r) { return r.json()["choices"][0]["message"]["content"].get<std::string>(); }

class ServerHostileHttp : public RealServerTest<ServerHostileHttp> {
 protected:
  void TearDown() override {
    fake_.release_all();
    server_.reset();
  }
  void start(Backend& backend, double drain_seconds = 5) {
    auto config = parse_server_config(R"({"port":0,"limits":{"drain_seconds":)" + std::to_string(drain_seconds) + "}}");
    ASSERT_TRUE(config.has_value()) << config.error().message;
    start_server(*config, &backend);
  }
  int pages_locked() {
    return request(port_, "GET", "/v1/cache/stats").json()["global"]["pages_locked"].get<int>();
  }
  // Nothing in flight, nothing locked: the fake reports a locked page per live generation.
  void expect_idle_fake(int cancelled) {
    EXPECT_TRUE(eventually([&] { return server_->api().inflight() == 0 && fake_.num_live == 0; }));
    EXPECT_EQ(fake_.num_cancelled, cancelled);
    EXPECT_EQ(pages_locked(), 0);
  }
  void expect_idle_real() {
    EXPECT_TRUE(eventually([&] { return server_->api().inflight() == 0 && pages_locked() == 0; }));
    EXPECT_EQ(runtime_->cache_stats().live_sequences, 0);
    EXPECT_EQ(runtime_->check_invariants(), "");
  }

  FakeBackend fake_;  // outlives the server: TearDown stops the server first
};

// ---- Pipelining -------------------------------------------------------------------

TEST_F(ServerHostileHttp, PipelinedRequestsAreAnsweredInOrder) {
  start(fake_);
  Client c(port_);
  // Sent in one write, with empty lines between requests (RFC 9112 2.2: ignored).
  c.send(chat("a b c", 8, false) + "\r\n" + get("/health") + chat("d e f", 8, true) + "\r\n\r\n" +
         chat("g h", 8, false, "Connection: close\r\n"));
  const Reply whole = c.next();
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(content(whole), "A B C");
  const Reply health = c.next();
  ASSERT_EQ(health.status, 200) << health.body;
  EXPECT_EQ(health.json()["status"], "ok");
  const Reply stream = c.next();
  ASSERT_EQ(stream.status, 200) << stream.body;
  EXPECT_EQ(stream.headers.at("Transfer-Encoding"), "chunked");  // so the connection outlives the stream
  EXPECT_EQ(stream_text(stream.body), "D E F");
  EXPECT_EQ(sse_payloads(stream.body).back(), "[DONE]");
  const Reply last = c.next();
  ASSERT_EQ(last.status, 200) << last.body;
  EXPECT_EQ(content(last), "G H");
  EXPECT_EQ(last.headers.at("Connection"), "close");
  EXPECT_TRUE(c.closed_by_server());
  expect_idle_fake(0);
}

TEST_F(ServerHostileHttp, BytesArrivingDuringAStreamAreTheNextRequestNotAHangUp) {
  start(fake_);
  fake_.hold = true;
  Client c(port_);
  c.send(chat("one two three", 8, true));
  ASSERT_TRUE(c.wait_for("ONE"));  // the generation is held after its first token
  c.send("\r\n" + get("/health"));
  std::this_thread::sleep_for(50ms);  // (setup only) the server reads them while the generation is held
  fake_.release_all();
  const Reply stream = c.next();
  ASSERT_EQ(stream.status, 200) << stream.body;
  EXPECT_EQ(stream_text(stream.body), "ONE TWO THREE");
  EXPECT_EQ(sse_payloads(stream.body).back(), "[DONE]");
  const Reply health = c.next();
  EXPECT_EQ(health.status, 200) << health.body;
  expect_idle_fake(0);
}

TEST_F(ServerHostileHttp, AStrayEmptyLineDuringAGenerationIsIgnored) {
  start(fake_);
  fake_.hold = true;
  Client c(port_);
  c.send(chat("alpha beta", 8, false));
  ASSERT_TRUE(eventually([&] { return fake_.num_live == 1; }));
  c.send("\r\n");
  std::this_thread::sleep_for(50ms);  // (setup only) the server reads it while the generation is held
  fake_.release_all();
  const Reply whole = c.next();
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(content(whole), "ALPHA BETA");
  c.send(get("/health", "Connection: close\r\n"));  // the connection still serves requests
  EXPECT_EQ(c.next().status, 200);
  expect_idle_fake(0);
}

TEST_F(ServerHostileHttp, PipelinedGenerationsOnTheRealModelLeaveTheCacheIdle) {
  start(*backend_);
  const std::string question = "Name one use of a transistor.";
  Client c(port_);
  c.send(chat(question, 8, false) + "\r\n" + chat(question, 8, true) + "\r\n" +
         get("/v1/cache/stats", "Connection: close\r\n"));
  const Reply whole = c.next();
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Reply stream = c.next();
  ASSERT_EQ(stream.status, 200) << stream.body;
  EXPECT_EQ(stream_text(stream.body), content(whole));  // greedy: the same text
  EXPECT_EQ(sse_payloads(stream.body).back(), "[DONE]");
  EXPECT_EQ(c.next().status, 200);
  EXPECT_TRUE(c.closed_by_server());
  expect_idle_real();
}

// ---- Half-close, hang-up, reset ---------------------------------------------------

// A client that shuts down its sending side after its requests still reads: it gets
// every answer. The server tells it from a hang-up by a probe (an interim 100) that
// only a closed socket answers with a reset.
TEST_F(ServerHostileHttp, HalfCloseAfterPipelinedRequestsGetsEveryAnswer) {
  start(fake_);
  fake_.hold = true;
  Client c(port_);
  c.send(chat("alpha beta", 8, false) + get("/health"));
  ASSERT_TRUE(eventually([&] { return fake_.num_live == 1; }));
  c.half_close();
  EXPECT_EQ(c.next().status, 100);  // the probe; clients skip interim responses
  fake_.release_all();
  const Reply whole = c.next();
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(content(whole), "ALPHA BETA");
  EXPECT_EQ(c.next().status, 200);
  EXPECT_TRUE(c.closed_by_server());
  expect_idle_fake(0);
}

TEST_F(ServerHostileHttp, HalfCloseDuringAStreamGetsTheRestOfIt) {
  start(fake_);
  fake_.hold = true;
  Client c(port_);
  c.send(chat("one two three", 8, true));
  ASSERT_TRUE(c.wait_for("ONE"));
  c.half_close();
  ASSERT_TRUE(c.wait_for("\n: ping\n"));  // the probe inside a stream: an SSE comment
  fake_.release_all();
  const Reply stream = c.next();
  ASSERT_EQ(stream.status, 200) << stream.body;
  EXPECT_EQ(stream_text(stream.body), "ONE TWO THREE");
  EXPECT_EQ(sse_payloads(stream.body).back(), "[DONE]");
  EXPECT_TRUE(c.closed_by_server());
  expect_idle_fake(0);
}

TEST_F(ServerHostileHttp, HalfCloseOnTheRealModelGetsTheAnswer) {
  start(*backend_);
  Client c(port_);
  c.send(chat("Name one use of a transistor.", 8, false));
  c.half_close();
  const Reply whole = c.next_final();
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_FALSE(content(whole).empty());
  EXPECT_TRUE(c.closed_by_server());
  expect_idle_real();
}

// A hang-up (FIN) or a reset still cancels at once, pipelined bytes or not.
TEST_F(ServerHostileHttp, HangUpOrResetStillCancelsTheGeneration) {
  start(fake_);
  fake_.hold = true;
  {
    Client c(port_);
    c.send(chat("one two three", 8, true) + get("/health"));
    ASSERT_TRUE(c.wait_for("ONE"));
  }  // closed
  EXPECT_TRUE(eventually([&] { return fake_.num_cancelled == 1; }));
  {
    Client c(port_);
    c.send(chat("alpha beta", 8, false));
    ASSERT_TRUE(eventually([&] { return fake_.num_live == 1; }));
  }  // closed before any byte of the reply: the probe meets a reset
  EXPECT_TRUE(eventually([&] { return fake_.num_cancelled == 2; }));
  {
    Client c(port_);
    c.send(chat("alpha beta", 8, false) + "\r\n");
    ASSERT_TRUE(eventually([&] { return fake_.num_live == 1; }));
    c.reset();
  }
  EXPECT_TRUE(eventually([&] { return fake_.num_cancelled == 3; }));
  expect_idle_fake(3);
}

// ---- Streams that cannot start, streams cut by shutdown ---------------------------

TEST_F(ServerHostileHttp, OverLongPromptIsRefusedBeforeAStreamStarts) {
  start(*backend_);
  std::string user;
  while (user.size() < 6 * runtime_->context_length()) user += "hello ";  // a token per word
  const Reply whole = request(port_, "POST", "/v1/chat/completions", chat_body("", user, 16, false));
  const Reply stream = request(port_, "POST", "/v1/chat/completions", chat_body("", user, 16, true));
  EXPECT_EQ(whole.status, 400) << whole.body.substr(0, 300);
  EXPECT_EQ(stream.status, 400) << stream.body.substr(0, 300);
  EXPECT_EQ(stream.headers.at("Content-Type"), "application/json");
  EXPECT_EQ(stream.json()["error"]["code"], "context_length_exceeded");
  EXPECT_EQ(stream.body, whole.body);
  expect_idle_real();
}

TEST_F(ServerHostileHttp, AStreamCutAtTheDrainDeadlineSaysWhy) {
  start(fake_, 0.2);
  fake_.hold = true;
  auto held = std::async(std::launch::async, [&] {
    return request(port_, "POST", "/v1/chat/completions", chat_body("", "never finishes", 8, true));
  });
  ASSERT_TRUE(eventually([&] { return fake_.num_live == 1; }));
  server_->stop();  // drains 0.2 s, then cancels
  const Reply r = held.get();
  ASSERT_EQ(r.status, 200);
  const auto payloads = sse_payloads(r.body);
  ASSERT_GE(payloads.size(), 2u) << r.body;
  EXPECT_EQ(payloads.back(), "[DONE]");
  const auto error = nlohmann::json::parse(payloads[payloads.size() - 2], nullptr, false);
  EXPECT_EQ(error["error"]["code"], "server_shutting_down") << r.body;
  for (const auto& p : payloads) EXPECT_EQ(p.find("\"finish_reason\":\"stop\""), std::string::npos) << p;
  EXPECT_EQ(server_->api().inflight(), 0);
  EXPECT_EQ(fake_.num_cancelled, 1);
}

// With no connection left open, stop() still sees a run that finishes during the drain
// (its settlement runs on the I/O threads) and returns without cancelling it.
TEST_F(ServerHostileHttp, StopReturnsOnceTheRunInFlightIsDone) {
  start(fake_, 5);
  fake_.hold = true;
  const Reply started = request(port_, "POST", "/v1/runs", R"({"workflow":{"agents":[{"id":"a","task":"t"}]}})");
  ASSERT_EQ(started.status, 202) << started.body;
  auto stopping = std::async(std::launch::async, [&] { server_->stop(); });
  ASSERT_TRUE(eventually([&] {  // stop() began: the listener is closed
    net::io_context ioc;
    tcp::socket s(ioc);
    boost::system::error_code ec;
    s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)), ec);
    return bool(ec);
  }));
  fake_.release_all();  // the run finishes within the drain
  stopping.get();
  EXPECT_EQ(server_->api().inflight(), 0);
  EXPECT_EQ(fake_.num_cancelled, 0);
}

// ---- SIGTERM on the real binary ---------------------------------------------------

const std::string kArbor = std::string(ARBOR_BINARY_DIR) + "/arbor";

// `arbor serve --port 0` with a config (limits.drain_seconds); its port is read from
// its first line. SIGKILLed and reaped when it goes, unless it has exited.
Result<cli::ChildProcess> start_serve(double drain_seconds) {
  const std::string config =
      std::string(ARBOR_BINARY_DIR) + "/hostile_http_serve_" + std::to_string(getpid()) + ".json";
  std::ofstream(config) << R"({"limits":{"drain_seconds":)" << drain_seconds << "}}";
  auto serve = cli::ChildProcess::start({.argv = {kArbor, "serve", "--port", "0", "--config", config, "--model",
                                                  ARBOR_DEFAULT_MODEL, "--threads", "2", "--kv-mem", "256"},
                                         .port_marker = "http://127.0.0.1:"});
  std::filesystem::remove(config);
  return serve;
}

std::string run_body(int max_tokens) {
  nlohmann::json agent = {{"task", "Write a story about a transistor."}, {"generation", {{"max_tokens", max_tokens}}}};
  nlohmann::json workflow = {{"name", "sigterm"}, {"agents", nlohmann::json::array()}};
  for (const char* id : {"a", "b"}) {
    agent["id"] = id;
    workflow["agents"].push_back(agent);
  }
  return nlohmann::json{{"workflow", workflow}}.dump();
}

// The drain waits for the run (seconds), not for its deadline (60 s): the process exits
// once the run is done, though no connection is left open (45 s is far above the run,
// far below the deadline; it took drain_seconds + 30 s before).
TEST_F(ServerHostileHttp, SigtermWaitsForTheRunInFlightThenExits) {
  if (!std::filesystem::exists(kArbor)) GTEST_SKIP() << "build the 'arbor' target to run this test";
  auto serve = start_serve(60);
  ASSERT_TRUE(serve) << serve.error().describe();
  const Reply started = request(serve->port(), "POST", "/v1/runs", run_body(24));
  ASSERT_EQ(started.status, 202) << started.body;
  serve->terminate();
  EXPECT_EQ(serve->wait_exit(45), 0);
}

// At the drain deadline what is left is cancelled, and each stream says so.
TEST_F(ServerHostileHttp, SigtermAtTheDrainDeadlineEndsStreamsWithTheReason) {
  if (!std::filesystem::exists(kArbor)) GTEST_SKIP() << "build the 'arbor' target to run this test";
  auto serve = start_serve(0.3);
  ASSERT_TRUE(serve) << serve.error().describe();
  const Reply started = request(serve->port(), "POST", "/v1/runs", run_body(1000));
  ASSERT_EQ(started.status, 202) << started.body;
  Client events(serve->port());
  events.send(get("/v1/runs/" + started.json()["id"].get<std::string>() + "/events"));
  Client stream(serve->port());
  stream.send(chat("Tell me a long story about transistors.", 1000, true));
  ASSERT_TRUE(events.wait_for("event: token"));
  ASSERT_TRUE(stream.wait_for("\"delta\":{\"content\""));  // a token chunk
  serve->terminate();
  EXPECT_EQ(serve->wait_exit(45), 0);

  const Reply chat_reply = stream.next();
  ASSERT_EQ(chat_reply.status, 200) << chat_reply.body;
  auto payloads = sse_payloads(chat_reply.body);
  ASSERT_GE(payloads.size(), 2u);
  EXPECT_EQ(payloads.back(), "[DONE]");
  EXPECT_EQ(nlohmann::json::parse(payloads[payloads.size() - 2])["error"]["code"], "server_shutting_down");
  for (const auto& p : payloads) EXPECT_EQ(p.find("\"finish_reason\":\"stop\""), std::string::npos) << p;

  const Reply run_events = events.next();
  ASSERT_EQ(run_events.status, 200) << run_events.body;
  payloads = sse_payloads(run_events.body);
  ASSERT_GE(payloads.size(), 2u);
  EXPECT_EQ(payloads.back(), "[DONE]");
  const auto finished = nlohmann::json::parse(payloads[payloads.size() - 2]);
  EXPECT_EQ(finished["type"], "run_finished");
  EXPECT_EQ(finished["status"], "cancelled");
}

}  // namespace
}  // namespace arbor::server::test

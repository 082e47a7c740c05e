// Helpers of the server tests: a blocking Beast HTTP client for loopback, an SSE
// reader, and a scripted Backend (FakeBackend) whose generations are deterministic,
// can be held open, and record cancellation.
#pragma once

#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "runtime/server/backend.hpp"

namespace arbor::server::test {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

struct Reply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;
  nlohmann::json json() const { return nlohmann::json::parse(body, nullptr, false); }
};

inline tcp::socket connect_loopback(net::io_context& ioc, int port) {
  tcp::socket socket(ioc);
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  return socket;
}

// Appends what an open stream sends to `text` until `done(text)` holds, the stream ends
// or `timeout` passes. A synchronous read ignores beast's expires_after, so each read
// first waits for data with poll(): a missing event fails the test, never hangs it.
template <class Done>
void read_until(beast::tcp_stream& stream, std::string& text, Done done,
                std::chrono::milliseconds timeout = std::chrono::seconds(120)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[4096];
  while (!done(text)) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    pollfd ready{stream.socket().native_handle(), POLLIN, 0};
    if (left <= 0 || ::poll(&ready, 1, int(left)) <= 0) return;
    beast::error_code ec;
    const std::size_t n = stream.socket().read_some(net::buffer(buf), ec);
    text.append(buf, n);
    if (ec) return;
  }
}

// One request on a fresh connection; reads the whole reply (streams until the close).
inline Reply request(int port, const std::string& method, const std::string& target, const std::string& body = "",
                     const std::string& key = "", const std::string& content_type = "application/json") {
  net::io_context ioc;
  beast::tcp_stream stream(connect_loopback(ioc, port));
  stream.expires_after(std::chrono::seconds(120));  // a hung server fails the test, never hangs it
  http::request<http::string_body> req(http::string_to_verb(method), target, 11);
  if (http::string_to_verb(method) == http::verb::unknown) req.method_string(method);
  req.set(http::field::host, "127.0.0.1");
  if (!key.empty()) req.set(http::field::authorization, "Bearer " + key);
  if (!body.empty() || method == "POST") {
    req.set(http::field::content_type, content_type);
    req.body() = body;
    req.prepare_payload();
  }
  http::write(stream, req);
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  beast::error_code ec;
  http::read(stream, buffer, parser, ec);
  Reply r;
  if (ec && ec != http::error::end_of_stream) {
    r.status = -1;
    r.body = ec.message();
    return r;
  }
  auto& res = parser.get();
  r.status = res.result_int();
  r.body = res.body();
  for (const auto& f : res) r.headers[std::string(f.name_string())] = std::string(f.value());
  return r;
}

// Sends raw bytes and returns everything the server writes until it closes.
inline std::string raw_exchange(int port, const std::string& bytes) {
  net::io_context ioc;
  beast::tcp_stream stream(connect_loopback(ioc, port));
  stream.expires_after(std::chrono::seconds(60));
  net::write(stream, net::buffer(bytes));
  std::string out;
  beast::error_code ec;
  char buf[4096];
  for (;;) {
    std::size_t n = stream.read_some(net::buffer(buf), ec);
    out.append(buf, n);
    if (ec) break;
  }
  return out;
}

// The `data:` payloads of an SSE body, in order.
inline std::vector<std::string> sse_payloads(const std::string& body) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    if (pos != 0 && body[pos - 1] != '\n') {
      ++pos;
      continue;
    }
    const auto end = body.find('\n', pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

// Concatenated delta content (chat) or text (completions) of a stream body.
inline std::string stream_text(const std::string& body) {
  std::string text;
  for (const auto& p : sse_payloads(body)) {
    if (p == "[DONE]") break;
    auto j = nlohmann::json::parse(p, nullptr, false);
    if (j.is_discarded() || !j.contains("choices") || j["choices"].empty()) continue;
    const auto& c = j["choices"][0];
    if (c.contains("delta") && c["delta"].contains("content")) text += c["delta"]["content"].get<std::string>();
    if (c.contains("text")) text += c["text"].get<std::string>();
  }
  return text;
}

inline std::string chat_body(const std::string& system, const std::string& user, int max_tokens, bool stream = false) {
  nlohmann::json j;
  j["model"] = "any";
  j["messages"] = nlohmann::json::array();
  if (!system.empty()) j["messages"].push_back({{"role", "system"}, {"content", system}});
  j["messages"].push_back({{"role", "user"}, {"content", user}});
  j["max_tokens"] = max_tokens;
  j["temperature"] = 0;
  if (stream) j["stream"] = true;
  return j.dump();
}

// Polls `done` every 10 ms, at most `seconds`; returns whether it became true.
template <class Pred>
bool eventually(Pred done, double seconds = 30) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// A scripted backend. A generation's output is the words of its last message (or raw
// prompt) echoed back, one token per word, upper-cased, at most max_tokens. The
// prompt token count is the number of bytes of all messages; cached_tokens counts the
// bytes of a system prompt this tenant already sent. With `hold` set, generations
// emit their first token and then wait until released or cancelled.
class FakeBackend final : public Backend {
 public:
  std::atomic<bool> hold{false};
  std::atomic<int> num_started{0}, num_cancelled{0}, num_live{0};
  std::atomic<int> num_run_controls{0};  // FakeRun objects alive (whoever holds them)
  // What nodes_json() answers (a router's nodes JSON); "" = not a router.
  void set_nodes(std::string json) {
    std::lock_guard lock(nodes_mutex_);
    nodes_ = std::move(json);
  }

  ~FakeBackend() override {
    release_all();
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mutex_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

  void release_all() {
    std::lock_guard lock(mutex_);
    released_ = true;
    cv_.notify_all();
  }

  std::string model_name() const override { return "fake-model"; }
  std::size_t context_length() const override { return 2048; }

  static std::string expected_output(const std::string& text, int max_tokens) {
    std::string out;
    int n = 0;
    std::string word;
    auto flush = [&] {
      if (word.empty() || n >= max_tokens) return;
      for (auto& c : word) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      out += (n ? " " : "") + word;
      ++n;
      word.clear();
    };
    for (char c : text) {
      if (c == ' ') flush();
      else word += c;
    }
    flush();
    return out;
  }

  struct FakeGeneration : Generation {
    std::atomic<bool> cancelled{false};
    FakeBackend* owner = nullptr;
    void cancel() override {
      if (!cancelled.exchange(true)) ++owner->num_cancelled;
      std::lock_guard lock(owner->mutex_);
      owner->cv_.notify_all();
    }
  };

  Result<std::shared_ptr<Generation>> start_generate(const GenerateRequest& req,
                                                     std::function<void(const std::string&)> on_token,
                                                     std::function<void(const Result<GenerateResult>&)> on_done) override {
    std::string text = req.raw_prompt ? *req.raw_prompt : req.messages.back().content;
    if (text == "FAIL") return fail(ErrorCode::out_of_memory, "fake: admission queue full");
    GenerateResult result;
    for (const auto& m : req.messages) result.prompt_tokens += m.content.size();
    if (req.raw_prompt) result.prompt_tokens = req.raw_prompt->size();
    {
      std::lock_guard lock(mutex_);
      if (!req.messages.empty() && req.messages[0].role == "system") {
        const std::string key = req.tenant + "\n" + req.messages[0].content;
        if (seen_.count(key)) result.cached_tokens = req.messages[0].content.size();
        seen_.insert(key);
      }
    }
    result.computed_tokens = result.prompt_tokens - result.cached_tokens;
    auto gen = std::make_shared<FakeGeneration>();
    gen->owner = this;
    ++num_started;
    ++num_live;
    const std::string output = expected_output(text, req.sampling.max_tokens);
    std::lock_guard lock(mutex_);
    threads_.emplace_back([this, gen, output, result, on_token, on_done]() mutable {
      std::vector<std::string> pieces;
      std::size_t start = 0;
      while (start < output.size()) {
        auto sp = output.find(' ', start + 1);
        if (sp == std::string::npos) sp = output.size();
        pieces.push_back(output.substr(start, sp - start));
        start = sp;
      }
      for (std::size_t i = 0; i < pieces.size() && !gen->cancelled; ++i) {
        if (on_token) on_token(pieces[i]);
        result.text += pieces[i];
        ++result.generated_tokens;
        if (i == 0 && hold) {
          std::unique_lock lock(mutex_);
          cv_.wait(lock, [&] { return released_ || gen->cancelled.load(); });
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      result.ttft_ms = 3;
      result.finish_reason = gen->cancelled ? FinishReason::cancelled : FinishReason::stop;
      --num_live;
      if (output == "NEVERFITS") return on_done(fail(ErrorCode::too_long, "fake: the prompt can never fit"));
      on_done(result);
    });
    return std::shared_ptr<Generation>(gen);
  }

  // Runs: the document's "name" is echoed; it finishes after emitting a few events
  // unless held.
  struct FakeRun : RunControl {
    ~FakeRun() override { --owner->num_run_controls; }
    std::string id_, tenant_;
    std::atomic<bool> done_{false}, cancelled_{false};
    std::string id() const override { return id_; }
    bool done() const override { return done_; }
    RunResult snapshot() const override {
      RunResult r;
      r.run_id = id_;
      r.tenant = tenant_;
      r.workflow = "fake";
      r.status = done_ ? (cancelled_ ? RunStatus::cancelled : RunStatus::ok) : RunStatus::running;
      return r;
    }
    FakeBackend* owner = nullptr;
    RunResult wait() override {
      std::unique_lock lock(owner->mutex_);
      owner->cv_.wait(lock, [&] { return done_.load(); });
      return snapshot();
    }
    void cancel() override {
      cancelled_ = true;
      std::lock_guard lock(owner->mutex_);
      owner->cv_.notify_all();
    }
  };

  Result<std::shared_ptr<RunControl>> start_run(const std::string& workflow_json,
                                                const std::map<std::string, std::string>& inputs,
                                                EventCallback on_event, const std::string& tenant,
                                                const DocumentAccess&) override {
    auto doc = nlohmann::json::parse(workflow_json, nullptr, false);
    if (doc.is_discarded() || !doc.contains("agents"))
      return fail(ErrorCode::invalid_argument, "<text>:1:1: /agents: a workflow needs at least one agent");
    auto run = std::make_shared<FakeRun>();
    run->id_ = "run-" + std::to_string(++num_runs_);
    run->tenant_ = tenant;
    run->owner = this;
    ++num_run_controls;
    std::lock_guard lock(mutex_);
    threads_.emplace_back([this, run, on_event] {
      auto emit = [&](Event::Kind kind, const std::string& agent, const std::string& text) {
        Event e;
        e.kind = kind;
        e.run_id = run->id_;
        e.agent_id = agent;
        e.text = text;
        if (kind == Event::Kind::run_finished) e.status = RunStatus::ok;
        if (kind == Event::Kind::agent_finished) e.status = AgentStatus::ok;
        on_event(e);
      };
      emit(Event::Kind::run_started, "", "");
      emit(Event::Kind::agent_started, "a", "");
      emit(Event::Kind::token, "a", "hel");
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return released_ || run->cancelled_.load() || !hold; });
      }
      emit(Event::Kind::token, "a", "lo");
      emit(Event::Kind::agent_finished, "a", "hello");
      emit(Event::Kind::run_finished, "", "");
      {
        std::lock_guard lock(mutex_);
        run->done_ = true;  // as RunHandle: done once its run_finished event is out
      }
      cv_.notify_all();
    });
    return std::shared_ptr<RunControl>(run);
  }

  std::string run_json(const RunResult& r) const override {
    return nlohmann::json{{"run_id", r.run_id}, {"tenant", r.tenant}, {"status", r.status}}.dump();
  }

  CacheStats cache_stats() const override {
    CacheStats s;
    s.pages_total = 100;
    s.pages_locked = num_live;
    s.tenants["alpha"].used_pages = 3;
    s.tenants["beta"].used_pages = 5;
    return s;
  }
  std::string nodes_json() const override {
    std::lock_guard lock(nodes_mutex_);
    return nodes_;
  }
  std::vector<CacheTreeNode> cache_tree(const std::string& tenant, std::size_t max_nodes) const override {
    CacheTreeNode n;
    n.id = 1;
    n.num_tokens = 16;
    n.snippet = "tree of " + tenant;
    return {n};
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool released_ = false;
  std::vector<std::thread> threads_;
  std::set<std::string> seen_;
  std::atomic<int> num_runs_{0};
  mutable std::mutex nodes_mutex_;
  std::string nodes_;
};

}  // namespace arbor::server::test

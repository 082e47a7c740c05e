// `arbor bench serve`: the HTTP server end to end. For each client count C, with the
// prefix cache on and off (a fresh Runtime and Server each, side by side in one
// process), the server listens on 127.0.0.1 (any free port) and C client threads each
// send N streaming POST /v1/chat/completions: one shared system prompt (~2,300
// characters, ~500 tokens), a short distinct user question per request, greedy,
// max_tokens from the flag. Per request: the time to the first streamed content token
// and to the end; per configuration: requests/s, generated tokens/s, TTFT p50/p99, the
// cache hit ratio (usage.prompt_tokens_details.cached_tokens over prompt_tokens) and
// the speedup of cache on over off (requests/s).
//
// One warm-up request per configuration (same system prompt, not measured) runs
// first, so the cache-on figures are the steady state of a server whose system prompt
// is already cached; the cache-off server gets the same warm-up.
//
// Connections: each client keeps its connection while the server keeps it alive (HTTP/1.1
// event streams are chunked and leave the connection open for the next request).
//
// Bounded: a fixed number of requests, each with a deadline; the server is stopped
// (drained) before the next configuration starts.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <latch>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "runtime/cli/bench.hpp"
#include "runtime/cli/command.hpp"
#include "runtime/cli/default_model.hpp"
#include "runtime/cli/options.hpp"
#include "runtime/cli/runtime_options.hpp"
#include "runtime/server/server.hpp"

namespace arbor::cli {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr auto kRequestTimeout = std::chrono::seconds(300);  // one request, queueing included
constexpr std::size_t kSystemChars = 2300;  // ~500 tokens of SmolLM2
constexpr int kDefaultTotalRequests = 32;  // per configuration, when N is not given

const char* const kParagraph[] = {
    "You are the help desk assistant of a small public library in a market town.",
    "Readers ask about opening hours, borrowing rules, the reading room and local history.",
    "The library opens at nine in the morning on weekdays and at ten on Saturdays, and it is closed on Sundays.",
    "A reader may borrow up to eight books at once for three weeks, and renew each loan twice unless another reader has reserved it.",
    "Late returns cost ten pence a day per book, capped at the price of a paperback.",
    "The reading room on the first floor is quiet, has twenty desks with lamps, and keeps the newspapers of the last month.",
    "The local history shelf holds parish records, old maps of the river and the mills, and photographs of the high street.",
    "Children under twelve borrow free of charge and may join the story hour every Wednesday afternoon.",
    "Answer in one or two short sentences of plain English, be polite, and say so when you do not know."};

const char* const kQuestions[] = {
    "When do you open on Saturday?", "How many books can I borrow?", "What does a late return cost?",
    "Can I renew a loan?", "Where is the reading room?", "Do you keep old newspapers?",
    "Is there a story hour for children?", "Are you open on Sunday?", "Do you have old maps of the river?",
    "How long is a loan?", "Can children borrow for free?", "Is the reading room quiet?",
    "Do you have photographs of the high street?", "What is on the local history shelf?",
    "How many desks are in the reading room?", "When does the library open on weekdays?"};

// The shared system prompt: the paragraph, numbered sections of it, until kSystemChars.
std::string system_prompt() {
  std::string text;
  for (int section = 1; text.size() < kSystemChars; ++section) {
    for (const char* sentence : kParagraph) {
      if (text.size() >= kSystemChars) break;
      text += (text.empty() ? "" : " ");
      if (sentence == kParagraph[0] && section > 1) text += "Section " + std::to_string(section) + ", again: ";
      text += sentence;
    }
  }
  return text;
}

std::string request_body(const std::string& system, const std::string& user, int max_tokens) {
  nlohmann::json j;
  j["model"] = "default";
  j["messages"] = {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", user}}};
  j["max_tokens"] = max_tokens;
  j["temperature"] = 0;
  j["stream"] = true;
  return j.dump();
}

// Its TokenUsage: the response's usage (generated_tokens = completion_tokens; no
// computed_tokens in an OpenAI usage).
struct Sample : TokenUsage {
  double ttft_ms = 0, total_ms = 0;
};

// One client: a blocking Beast connection to the loopback server, reused while the
// server keeps it alive (it reconnects after a reply that closes the connection).
class Client {
 public:
  explicit Client(int port) : port_(port) {}

  Result<Sample> chat_stream(const std::string& body) {
    const auto t0 = Clock::now();
    auto ms_since_t0 = [&] { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); };
    beast::error_code ec;
    if (!stream_) {
      stream_.emplace(ioc_);
      stream_->expires_after(kRequestTimeout);
      stream_->connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)), ec);
      if (ec) return drop("connect to 127.0.0.1:" + std::to_string(port_) + ": " + ec.message());
    }
    stream_->expires_after(kRequestTimeout);
    http::request<http::string_body> req(http::verb::post, "/v1/chat/completions", 11);
    req.set(http::field::host, "127.0.0.1");
    req.set(http::field::content_type, "application/json");
    req.keep_alive(true);
    req.body() = body;
    req.prepare_payload();
    http::write(*stream_, req, ec);
    if (ec) return drop("send: " + ec.message());

    http::response_parser<http::string_body> parser;
    parser.body_limit(16 << 20);
    Sample s;
    bool first = false, done = false;
    std::size_t scanned = 0;
    while (!parser.is_done()) {
      http::read_some(*stream_, buffer_, parser, ec);
      if (ec) return drop("read: " + ec.message() + " (request timeout or server gone)");
      if (!parser.is_header_done()) continue;
      if (parser.get().result_int() != 200) continue;  // read the whole error body first
      // Complete server-sent events ("...\n\n") not yet looked at.
      const std::string& text = parser.get().body();
      for (std::size_t end; (end = text.find("\n\n", scanned)) != std::string::npos; scanned = end + 2) {
        const std::string_view event(text.data() + scanned, end - scanned);
        const auto at = event.find("data: ");
        if (at == std::string_view::npos) continue;
        const std::string_view payload = event.substr(at + 6);
        if (payload == "[DONE]") {
          done = true;
          s.total_ms = ms_since_t0();
          continue;
        }
        auto j = nlohmann::json::parse(payload, nullptr, false);
        if (j.is_discarded()) return drop("malformed stream chunk: " + std::string(payload.substr(0, 200)));
        if (j.contains("error")) return drop("error in stream: " + j["error"].dump());
        if (j.contains("choices") && !j["choices"].empty()) {
          const auto& delta = j["choices"][0].value("delta", nlohmann::json::object());
          if (delta.contains("content") && !delta["content"].get<std::string>().empty()) {
            if (!first) s.ttft_ms = ms_since_t0();
            first = true;
            ++s.generated_tokens;  // counted chunks; replaced by the usage below
          }
        }
        if (j.contains("usage") && j["usage"].is_object()) {
          const auto& u = j["usage"];
          s.prompt_tokens = u.value("prompt_tokens", 0ull);
          s.generated_tokens = u.value("completion_tokens", s.generated_tokens);
          if (u.contains("prompt_tokens_details")) s.cached_tokens = u["prompt_tokens_details"].value("cached_tokens", 0ull);
        }
      }
      // Once the stream is over: a connection the server closes is not read to its end.
      if (done && !parser.get().keep_alive()) break;
    }
    if (parser.get().result_int() != 200)
      return drop("HTTP " + std::to_string(parser.get().result_int()) + ": " + parser.get().body().substr(0, 300));
    if (!done) return drop("the stream ended without [DONE]");
    if (!parser.get().keep_alive()) close();
    return s;
  }

  void close() {
    if (!stream_) return;
    beast::error_code ec;
    stream_->socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.reset();
    buffer_.clear();
  }

 private:
  Result<Sample> drop(const std::string& what) {
    close();
    return fail(ErrorCode::failed, "bench serve client: " + what);
  }

  int port_;
  net::io_context ioc_;
  std::optional<beast::tcp_stream> stream_;
  beast::flat_buffer buffer_;
};

// Its TokenUsage: the samples' sums.
struct Figures : TokenUsage {
  int num_requests = 0;
  double wall_s = 0, requests_per_s = 0, tokens_per_s = 0, ttft_p50_ms = 0, ttft_p99_ms = 0, latency_p50_ms = 0;
};

// Nearest-rank percentile of a sorted, non-empty list.
double percentile(const std::vector<double>& sorted, double p) {
  const auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * double(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

Result<Figures> measure(int port, int num_clients, int per_client, int max_tokens, const std::string& system) {
  {  // warm-up, not measured
    Client warm(port);
    if (auto r = warm.chat_stream(request_body(system, "Hello, who are you?", max_tokens)); !r)
      return std::unexpected(r.error());
  }
  std::vector<std::vector<Sample>> samples(static_cast<std::size_t>(num_clients));
  std::vector<std::optional<Error>> errors(static_cast<std::size_t>(num_clients));
  std::latch ready(num_clients + 1);
  std::vector<std::thread> threads;
  for (int c = 0; c < num_clients; ++c) {
    threads.emplace_back([&, c] {
      Client client(port);
      ready.arrive_and_wait();
      for (int i = 0; i < per_client; ++i) {
        const int k = c * per_client + i;
        const std::string user = "Reader " + std::to_string(k) + " asks: " + kQuestions[k % 16];
        auto s = client.chat_stream(request_body(system, user, max_tokens));
        if (!s) {
          errors[std::size_t(c)] = s.error();
          break;
        }
        samples[std::size_t(c)].push_back(*s);
      }
      client.close();
    });
  }
  const auto t0 = Clock::now();
  ready.arrive_and_wait();
  for (auto& t : threads) t.join();
  Figures f;
  f.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  for (const auto& e : errors)
    if (e) return std::unexpected(*e);
  std::vector<double> ttft, latency;
  for (const auto& list : samples)
    for (const Sample& s : list) {
      ttft.push_back(s.ttft_ms);
      latency.push_back(s.total_ms);
      f += s.usage();
    }
  std::sort(ttft.begin(), ttft.end());
  std::sort(latency.begin(), latency.end());
  f.num_requests = int(ttft.size());
  f.requests_per_s = f.num_requests / f.wall_s;
  f.tokens_per_s = double(f.generated_tokens) / f.wall_s;
  f.ttft_p50_ms = percentile(ttft, 50);
  f.ttft_p99_ms = percentile(ttft, 99);
  f.latency_p50_ms = percentile(latency, 50);
  return f;
}

// One configuration: a fresh runtime, backend and server, stopped before returning.
Result<Figures> run_once(const RuntimeConfig& runtime_config, int num_clients, int per_client, int max_tokens,
                         const std::string& system) {
  server::ServerConfig config;
  config.host = "127.0.0.1";
  config.port = 0;
  config.max_inflight = std::max(64, num_clients + 1);
  config.max_tokens = std::max(config.max_tokens, max_tokens);
  config.runtime = runtime_config;
  auto runtime = Runtime::create(config.runtime);
  if (!runtime) return std::unexpected(runtime.error());
  auto backend = server::make_runtime_backend(**runtime);
  auto server = server::Server::start(config, *backend);
  if (!server) return std::unexpected(server.error());
  auto figures = measure((*server)->port(), num_clients, per_client, max_tokens, system);
  (*server)->stop();
  server->reset();
  backend.reset();
  runtime->reset();
  return figures;
}

}  // namespace

namespace {

struct ServeBenchOptions {
  std::string clients = "1,8,32";
  int requests_per_client = 0;
  int max_tokens = 32;
  bool json = false;
  RuntimeOptions runtime;  // all but --no-cache: both are measured
};

int bench_serve(const ServeBenchOptions& o) {
  RuntimeConfig config;
  o.runtime.apply(config);
  const auto counts = parse_integer_list(o.clients);
  const int fixed_per_client = o.requests_per_client;
  const int max_tokens = o.max_tokens;
  const std::string system = system_prompt();

  BenchReport report(o.json, {{"threads", config.num_threads},
                              {"precision", to_string(config.precision)},
                              {"max_tokens", max_tokens},
                              {"system_prompt_chars", system.size()}});
  report.header("%7s %5s %5s %7s %7s %8s %9s %9s %9s %6s %8s\n", "clients", "cache", "reqs", "wall_s", "req/s",
                "gen_tok/s", "ttft_p50", "ttft_p99", "lat_p50", "hit%", "speedup");
  for (int c : counts) {
    const int per_client = fixed_per_client > 0 ? fixed_per_client : std::max(1, kDefaultTotalRequests / c);
    Figures on, off;
    for (bool cache : {true, false}) {
      config.prefix_caching = cache;
      auto f = run_once(config, c, per_client, max_tokens, system);
      if (!f) return std::fprintf(stderr, "arbor bench serve: %s\n", f.error().describe().c_str()), kExitFailed;
      (cache ? on : off) = *f;
    }
    const double speedup = on.requests_per_s / off.requests_per_s;
    for (bool cache : {true, false}) {
      const Figures& f = cache ? on : off;
      char speed[16] = "";
      if (cache) std::snprintf(speed, sizeof speed, "%.2fx", speedup);
      report.add({{"clients", c}, {"cache", cache}, {"requests_per_client", per_client}, {"requests", f.num_requests},
                  {"wall_s", f.wall_s}, {"requests_per_s", f.requests_per_s},
                  {"generated_tokens_per_s", f.tokens_per_s}, {"ttft_p50_ms", f.ttft_p50_ms},
                  {"ttft_p99_ms", f.ttft_p99_ms}, {"latency_p50_ms", f.latency_p50_ms},
                  {"prompt_tokens", f.prompt_tokens}, {"cached_tokens", f.cached_tokens},
                  {"completion_tokens", f.generated_tokens}, {"hit_ratio", hit_ratio(f)},
                  {"speedup_vs_no_cache", cache ? speedup : 1.0},
                  {"ttft_p50_speedup_vs_no_cache", cache ? off.ttft_p50_ms / on.ttft_p50_ms : 1.0}},
                 "%7d %5s %5d %7.1f %7.2f %8.1f %9.0f %9.0f %9.0f %6.1f %8s\n", c, cache ? "on" : "off",
                 f.num_requests, f.wall_s, f.requests_per_s, f.tokens_per_s, f.ttft_p50_ms, f.ttft_p99_ms,
                 f.latency_p50_ms, 100.0 * hit_ratio(f), speed);
    }
  }
  return report.finish();
}

}  // namespace

Runner setup_bench_serve(CLI::App& app) {
  auto o = std::make_shared<ServeBenchOptions>();
  declare_bench_counts(app, "--clients", o->clients, "concurrent client counts");
  app.add_option("--requests-per-client", o->requests_per_client,
                 "streamed requests per client; 0 = " + std::to_string(kDefaultTotalRequests) +
                     " / clients, at least 1")
      ->type_name("N")
      ->check(integer_in(0, 1000))
      ->capture_default_str();
  declare_bench_max_tokens(app, o->max_tokens);
  declare_bench_json(app, o->json);
  o->runtime.declare(app, kAllRuntimeFlags & ~kNoCacheFlag);
  return [o] { return bench_serve(*o); };
}

}  // namespace arbor::cli

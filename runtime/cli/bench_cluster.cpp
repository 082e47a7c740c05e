// `arbor bench cluster`: cache-aware routing against round-robin over the same
// cluster. For each routing, N fresh `arbor node` processes (this executable, on
// loopback, any free ports) and a router (cluster::ClusterBackend, in this process, no
// HTTP) serve R greedy chat requests over M documents (~300 tokens each, each document
// R/M times in a fixed shuffled order, each request with its own question), C at a time. Figures: the cluster's
// prompt tokens, the tokens it computed (prefilled) against the ideal (each document's
// shared pages computed once cluster-wide, every request's own tail once), the hit
// ratio (cached / prompt) and the wall time. Bounded: R requests, each with a deadline.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <algorithm>
#include <random>
#include <memory>
#include <thread>

#include "model/chat_template.hpp"
#include "model/gguf.hpp"
#include "model/tokenizer.hpp"
#include "runtime/chat_prompt.hpp"
#include "runtime/cli/bench.hpp"
#include "runtime/cli/child_process.hpp"
#include "runtime/cli/options.hpp"
#include "runtime/cli/runtime_options.hpp"
#include "runtime/cluster/cluster_backend.hpp"

namespace arbor::cli {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kRequestTimeout = std::chrono::seconds(600);

struct ClusterBenchOptions {
  int nodes = 3, docs = 4, requests = 24, concurrency = 6, max_tokens = 8, node_threads = 1, node_kv_mb = 64;
  RuntimeOptions runtime;  // --model
};

// An `arbor node` child on a free loopback port; SIGTERMed (then reaped) when it goes.
Result<ChildProcess> start_node(const std::string& exe, const ClusterBenchOptions& o, const std::string& model) {
  return ChildProcess::start({.argv = {exe, "node", "--listen", "127.0.0.1:0", "--model", model, "--threads",
                                       std::to_string(o.node_threads), "--kv-mem", std::to_string(o.node_kv_mb)},
                              .port_marker = "listening on 127.0.0.1:",
                              .stop_seconds = 60});
}

std::string document(int n) {
  static const char* const places[] = {"Veloria", "Quenmark", "Ostheim", "Larnach", "Tirsk", "Pellam", "Varr", "Onda"};
  const std::string place = places[n % 8];
  std::string text = "Report " + std::to_string(n) + " on the harbor town of " + place + ".\n";
  for (int i = 0; i < 12; ++i)
    text += "In season " + std::to_string(i + 1) + ", " + place + " shipped " + std::to_string(30 + 7 * i + n) +
            " crates of amber and " + std::to_string(11 * i + 3 * n) + " barrels of salt to the northern isles. ";
  return text;
}

// Request i's document: each document R/M times (+1 for the first R%M), in a fixed
// shuffled order, so round-robin cannot line up with the documents by accident (with
// M a multiple of N, request i % N over document i % M would always meet its cache).
int document_of(int i, const ClusterBenchOptions& o) {
  static std::vector<int> order;
  if (order.size() != std::size_t(o.requests)) {
    order.resize(o.requests);
    for (int k = 0; k < o.requests; ++k) order[k] = k % o.docs;
    std::mt19937 rng(12345);
    std::shuffle(order.begin(), order.end(), rng);
  }
  return order[i];
}

GenerateRequest request_of(int i, const ClusterBenchOptions& o) {
  GenerateRequest r;
  r.messages = {{"system", document(document_of(i, o))}, {"user", "Question " + std::to_string(i) + ": what happened in season " +
                                                               std::to_string(1 + i % 12) + "?"}};
  r.sampling.max_tokens = o.max_tokens;
  r.sampling.temperature = 0;
  return r;
}

struct Figures {
  std::size_t prompt = 0, cached = 0, computed = 0, failed = 0;
  double wall_s = 0;
};

Result<Figures> measure(cluster::Routing routing, const std::string& exe, const std::string& model,
                        const ClusterBenchOptions& o) {
  std::vector<ChildProcess> nodes;
  cluster::ClusterOptions options;
  options.routing = routing;
  options.model_path = model;
  for (int i = 0; i < o.nodes; ++i) {
    auto node = start_node(exe, o, model);
    if (!node) return std::unexpected(node.error());
    nodes.push_back(std::move(*node));
    options.nodes.push_back({"127.0.0.1", static_cast<std::uint16_t>(nodes.back().port())});
  }
  auto backend = cluster::ClusterBackend::connect(std::move(options));
  if (!backend) return std::unexpected(backend.error());
  Figures f;
  std::mutex mu;
  std::atomic<int> next{0};
  const auto start = Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < o.concurrency; ++c)
    clients.emplace_back([&] {
      for (int i = next++; i < o.requests; i = next++) {
        auto done = std::make_shared<std::promise<Result<GenerateResult>>>();
        auto outcome = done->get_future();
        auto g = (*backend)->start_generate(request_of(i, o), {},
                                            [done](const Result<GenerateResult>& r) { done->set_value(r); });
        const bool ok = g && outcome.wait_for(kRequestTimeout) == std::future_status::ready;
        std::lock_guard lock(mu);
        if (!ok) {
          ++f.failed;
          continue;
        }
        auto r = outcome.get();
        if (!r) {
          ++f.failed;
          continue;
        }
        f.prompt += r->prompt_tokens;
        f.cached += r->cached_tokens;
        f.computed += r->computed_tokens;
      }
    });
  for (auto& t : clients) t.join();
  f.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  backend->reset();
  return f;
}

// Each document's shared pages once, every request's own tail once.
Result<std::size_t> ideal_computed(const std::string& model, const ClusterBenchOptions& o, std::size_t page_size) {
  auto file = model::GgufFile::open(model);
  if (!file) return std::unexpected(file.error());
  auto tok = model::Tokenizer::from_gguf(*file);
  if (!tok) return std::unexpected(tok.error());
  const auto chat = model::ChatTemplate::from_gguf(*file);
  std::vector<std::vector<std::int32_t>> ids;
  for (int i = 0; i < o.requests; ++i) {
    auto p = prompt_ids(request_of(i, o), {}, **tok, chat);
    if (!p) return std::unexpected(p.error());
    ids.push_back(std::move(*p));
  }
  std::size_t total = 0;
  for (int d = 0; d < o.docs; ++d) {
    std::vector<const std::vector<std::int32_t>*> group;
    for (int i = 0; i < o.requests; ++i)
      if (document_of(i, o) == d) group.push_back(&ids[i]);
    if (group.empty()) continue;
    std::size_t common = group[0]->size();
    for (const auto* g : group) {
      std::size_t k = 0;
      while (k < common && k < g->size() && (*g)[k] == (*group[0])[k]) ++k;
      common = k;
    }
    const std::size_t shared = group.size() > 1 ? common / page_size * page_size : 0;
    total += shared;
    for (const auto* g : group) total += g->size() - shared;
  }
  return total;
}

int run(const ClusterBenchOptions& o) {
  RuntimeConfig config;
  o.runtime.apply(config);
  std::error_code ec;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return std::fprintf(stderr, "arbor bench cluster: cannot find this executable: %s\n", ec.message().c_str()), kExitFailed;
  auto ideal = ideal_computed(config.model_path, o, std::size_t(config.page_size));
  if (!ideal) return std::fprintf(stderr, "arbor bench cluster: %s\n", ideal.error().describe().c_str()), kExitFailed;
  std::printf("arbor bench cluster: %d nodes (%d threads, %d MiB KV each), %d requests over %d documents, %d at a "
              "time, max_tokens %d, greedy\n",
              o.nodes, o.node_threads, o.node_kv_mb, o.requests, o.docs, o.concurrency, o.max_tokens);
  std::printf("%-12s %8s %9s %7s %9s %6s %8s %6s\n", "routing", "prompt", "computed", "ideal", "comp/ideal", "hit",
              "wall_s", "failed");
  double hit[2] = {0, 0};
  int k = 0;
  for (auto routing : {cluster::Routing::cache_aware, cluster::Routing::round_robin}) {
    auto f = measure(routing, exe, config.model_path, o);
    if (!f) return std::fprintf(stderr, "arbor bench cluster: %s\n", f.error().describe().c_str()), kExitFailed;
    hit[k] = f->prompt ? double(f->cached) / double(f->prompt) : 0;
    std::printf("%-12s %8zu %9zu %7zu %9.3f %6.3f %8.2f %6zu\n",
                routing == cluster::Routing::cache_aware ? "cache-aware" : "round-robin", f->prompt, f->computed,
                *ideal, double(f->computed) / double(*ideal), hit[k], f->wall_s, f->failed);
    std::fflush(stdout);
    if (f->failed) return kExitFailed;
    ++k;
  }
  std::printf("hit ratio, cache-aware over round-robin: %.2fx\n", hit[1] > 0 ? hit[0] / hit[1] : 0.0);
  return kExitOk;
}

}  // namespace

Runner setup_bench_cluster(CLI::App& app) {
  auto o = std::make_shared<ClusterBenchOptions>();
  app.add_option("--nodes", o->nodes, "`arbor node` processes")->check(integer_in(1, 16))->capture_default_str();
  app.add_option("--docs", o->docs, "distinct shared documents")->check(integer_in(1, 64))->capture_default_str();
  app.add_option("--requests", o->requests, "requests per routing")->check(integer_in(1, 4096))->capture_default_str();
  app.add_option("--concurrency", o->concurrency, "requests in flight at once")
      ->check(integer_in(1, 256))
      ->capture_default_str();
  app.add_option("--max-tokens", o->max_tokens, "tokens generated per request")
      ->check(integer_in(1, 1024))
      ->capture_default_str();
  app.add_option("--node-threads", o->node_threads, "compute threads per node")
      ->check(integer_in(1, 256))
      ->capture_default_str();
  app.add_option("--node-kv-mem", o->node_kv_mb, "KV pool per node, MiB")
      ->check(integer_in(1, 1 << 20))
      ->capture_default_str();
  o->runtime.declare(app, kModelFlag);
  return [o] { return run(*o); };
}

}  // namespace arbor::cli

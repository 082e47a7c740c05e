// `arbor bench cluster`: cache-aware routing against round-robin over the same
// cluster. For each routing, N fresh `arbor node` processes (this executable, on
// loopback, any free ports) and a router (cluster::ClusterBackend, in this process, no
// HTTP) serve R jobs over M documents (~300 tokens each, each document R/M times in a
// fixed shuffled order), C at a time. A job is (--workload):
//   runs  a workflow run (POST /v1/runs): K agents sharing the document as their
//         SharedPrefix, each with its own question as its TaskSuffix;
//   chat  one greedy chat request: the document as the system message, its own question.
// Figures: the cluster's prompt tokens, the tokens it computed (prefilled, warm-ups
// included) against the ideal (each document's shared pages computed once
// cluster-wide, every prompt's own tail once), the hit ratio (cached / prompt) and the
// wall time. Bounded: R jobs, each with a deadline.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <memory>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "actors/conversation.hpp"
#include "model/chat_template.hpp"
#include "model/gguf.hpp"
#include "model/tokenizer.hpp"
#include "runtime/chat_prompt.hpp"
#include "runtime/cli/bench.hpp"
#include "runtime/cli/child_process.hpp"
#include "runtime/cli/cluster_tls_options.hpp"
#include "runtime/cli/options.hpp"
#include "runtime/cli/runtime_options.hpp"
#include "runtime/cluster/cluster_backend.hpp"
#include "workflows/workflow.hpp"

namespace arbor::cli {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kJobTimeout = std::chrono::seconds(600);

struct ClusterBenchOptions {
  std::string workload = "runs";
  int nodes = 3, docs = 4, requests = 24, agents = 4, concurrency = 6, max_tokens = 8, node_threads = 1,
      node_kv_mb = 64;
  RuntimeOptions runtime;  // --model
  cluster::ClusterTls tls;  // --cluster-*: nodes and router over mutual TLS
  bool runs() const { return workload == "runs"; }
};

// An `arbor node` child on a free loopback port; SIGTERMed (then reaped) when it goes.
Result<ChildProcess> start_node(const std::string& exe, const ClusterBenchOptions& o, const std::string& model) {
  std::vector<std::string> argv = {exe,         "node", "--listen", "127.0.0.1:0", "--model", model, "--threads",
                                   std::to_string(o.node_threads), "--kv-mem", std::to_string(o.node_kv_mb)};
  if (o.tls.enabled())
    argv.insert(argv.end(), {"--cluster-cert", o.tls.certificate, "--cluster-key", o.tls.key, "--cluster-ca", o.tls.ca});
  return ChildProcess::start({.argv = std::move(argv), .port_marker = "listening on 127.0.0.1:", .stop_seconds = 60});
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

// Job i's document: each document R/M times (+1 for the first R%M), in a fixed
// shuffled order, so round-robin cannot line up with the documents by accident (with
// M a multiple of N, job i % N over document i % M would always meet its cache).
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

// Question n: chat request n's, or agent k's of run i (n = i * agents + k).
std::string question(int n) {
  return "Question " + std::to_string(n) + ": what happened in season " + std::to_string(1 + n % 12) + "?";
}

GenerateRequest request_of(int i, const ClusterBenchOptions& o) {
  GenerateRequest r;
  r.messages = {{"system", document(document_of(i, o))}, {"user", question(i)}};
  r.sampling.max_tokens = o.max_tokens;
  r.sampling.temperature = 0;
  return r;
}

// Run i: --agents root agents, the document as their shared prefix, one question each.
std::string workflow_of(int i, const ClusterBenchOptions& o) {
  nlohmann::json agents = nlohmann::json::array();
  for (int k = 0; k < o.agents; ++k)
    agents.push_back({{"id", "q" + std::to_string(k)}, {"prefix", "doc"}, {"task", question(i * o.agents + k)}});
  nlohmann::json wf = {
      {"name", "bench_cluster_" + std::to_string(i)},
      {"tenant", "bench"},
      {"defaults",
       {{"generation", {{"max_tokens", o.max_tokens}, {"temperature", 0}}},
        {"max_retries", 0},
        {"timeout_ms", std::chrono::milliseconds(kJobTimeout).count()}}},
      {"prefixes", {{"doc", {{"system", document(document_of(i, o))}}}}},
      {"agents", agents}};
  return wf.dump();
}

// One job's token counts; computed_tokens include its warm-ups (all prefill work).
Result<TokenUsage> run_job(cluster::ClusterBackend& backend, int i, const ClusterBenchOptions& o) {
  if (o.runs()) {
    auto run = backend.start_run(workflow_of(i, o), {}, nullptr, "bench", DocumentAccess::no_files());
    if (!run) return std::unexpected(run.error());
    const RunResult result = (*run)->wait();  // bounded: every agent has a timeout
    if (result.status != RunStatus::ok) return fail(ErrorCode::failed, "run " + result.run_id + ": " + result.error);
    TokenUsage u;
    for (const AgentResult& a : result.agents) {
      u += a.usage();
      u.computed_tokens += a.warmup_tokens;
    }
    return u;
  }
  auto done = std::make_shared<std::promise<Result<GenerateResult>>>();
  auto outcome = done->get_future();
  auto g = backend.start_generate(request_of(i, o), {}, [done](const Result<GenerateResult>& r) { done->set_value(r); });
  if (!g) return std::unexpected(g.error());
  if (outcome.wait_for(kJobTimeout) != std::future_status::ready) return fail(ErrorCode::timeout, "no answer in 600 s");
  auto r = outcome.get();
  if (!r) return std::unexpected(r.error());
  return r->usage();
}

struct Figures : TokenUsage {
  std::size_t failed = 0;
  std::string first_error;
  double wall_s = 0;
  std::string per_node;  // jobs sent to each node, by route: "7 (prefix 6, cold 1)"
};

std::string jobs_per_node(const cluster::ClusterBackend& backend, bool runs) {
  std::string text;
  for (const cluster::NodeView& n : backend.nodes()) {
    const cluster::RouteCounts& c = runs ? n.runs_routed : n.routed;
    std::uint64_t total = 0;
    std::string kinds;
    for (auto kind : cluster::kRouteKinds) {
      total += c[kind];
      if (c[kind]) kinds += std::string(kinds.empty() ? "" : ", ") + to_string(kind) + " " + std::to_string(c[kind]);
    }
    text += (text.empty() ? "" : "; ") + std::to_string(total) + " (" + kinds + ")";
  }
  return text;
}

Result<Figures> measure(cluster::Routing routing, const std::string& exe, const std::string& model,
                        const ClusterBenchOptions& o) {
  std::vector<ChildProcess> nodes;
  cluster::ClusterOptions options;
  options.routing = routing;
  options.model_path = model;
  options.tls = o.tls;
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
        auto u = run_job(**backend, i, o);
        std::lock_guard lock(mu);
        if (u) {
          f.usage() += *u;
        } else if (f.failed++ == 0) {
          f.first_error = u.error().describe();
        }
      }
    });
  for (auto& t : clients) t.join();
  f.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  f.per_node = jobs_per_node(**backend, o.runs());
  backend->reset();
  return f;
}

// Every prompt the jobs send, with its document: a chat request's, or each agent's
// first turn as actors::Conversation tokenizes it (its prefix's text, then its task).
using DocumentPrompts = std::vector<std::pair<int, std::vector<std::int32_t>>>;

Result<DocumentPrompts> job_prompts(const std::string& model, const ClusterBenchOptions& o) {
  auto file = model::GgufFile::open(model);
  if (!file) return std::unexpected(file.error());
  auto tok = model::Tokenizer::from_gguf(*file);
  if (!tok) return std::unexpected(tok.error());
  const auto chat = model::ChatTemplate::from_gguf(*file);
  DocumentPrompts prompts;
  for (int i = 0; i < o.requests; ++i) {
    if (!o.runs()) {
      auto p = prompt_ids(request_of(i, o), {}, **tok, chat);
      if (!p) return std::unexpected(p.error());
      prompts.emplace_back(document_of(i, o), std::move(*p));
      continue;
    }
    auto plan = workflows::load_workflow_text(workflow_of(i, o), DocumentAccess::no_files());
    if (!plan) return fail(ErrorCode::invalid_argument, plan.error().format());
    for (int k = 0; k < o.agents; ++k) {
      actors::Conversation conversation(**tok, chat);
      conversation.start(plan->prefixes.at("doc").text, question(i * o.agents + k));
      prompts.emplace_back(document_of(i, o), conversation.prompt());
    }
  }
  return prompts;
}

// Each document's shared pages once, every prompt's own tail once.
std::size_t ideal_computed(const DocumentPrompts& prompts, const ClusterBenchOptions& o, std::size_t page_size) {
  std::size_t total = 0;
  for (int d = 0; d < o.docs; ++d) {
    std::vector<const std::vector<std::int32_t>*> group;
    for (const auto& [doc, ids] : prompts)
      if (doc == d) group.push_back(&ids);
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
  if (auto tls = cluster::check_cluster_tls(o.tls); !tls)
    return std::fprintf(stderr, "arbor bench cluster: %s\n", tls.error().message.c_str()), kExitInvalid;
  std::error_code ec;
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  if (ec) return std::fprintf(stderr, "arbor bench cluster: cannot find this executable: %s\n", ec.message().c_str()), kExitFailed;
  auto prompts = job_prompts(config.model_path, o);
  if (!prompts) return std::fprintf(stderr, "arbor bench cluster: %s\n", prompts.error().describe().c_str()), kExitFailed;
  const std::size_t ideal = ideal_computed(*prompts, o, std::size_t(config.page_size));
  const std::string jobs = o.runs() ? "workflow runs of " + std::to_string(o.agents) + " agents" : "chat requests";
  std::printf("arbor bench cluster: %d nodes (%d threads, %d MiB KV each), %d %s over %d documents, %d at a "
              "time, max_tokens %d, greedy, %s\n",
              o.nodes, o.node_threads, o.node_kv_mb, o.requests, jobs.c_str(), o.docs, o.concurrency, o.max_tokens,
              o.tls.enabled() ? "mutual TLS" : "plain TCP");
  std::printf("%-12s %8s %9s %7s %9s %6s %8s %6s\n", "routing", "prompt", "computed", "ideal", "comp/ideal", "hit",
              "wall_s", "failed");
  double hit[2] = {0, 0};
  int k = 0;
  for (auto routing : {cluster::Routing::cache_aware, cluster::Routing::round_robin}) {
    auto f = measure(routing, exe, config.model_path, o);
    if (!f) return std::fprintf(stderr, "arbor bench cluster: %s\n", f.error().describe().c_str()), kExitFailed;
    hit[k] = hit_ratio(*f);
    std::printf("%-12s %8zu %9zu %7zu %9.3f %6.3f %8.2f %6zu\n",
                routing == cluster::Routing::cache_aware ? "cache-aware" : "round-robin", std::size_t(f->prompt_tokens),
                std::size_t(f->computed_tokens), ideal, double(f->computed_tokens) / double(ideal), hit[k], f->wall_s,
                f->failed);
    std::printf("%-12s jobs per node: %s\n", "", f->per_node.c_str());
    std::fflush(stdout);
    if (f->failed) return std::fprintf(stderr, "arbor bench cluster: %s\n", f->first_error.c_str()), kExitFailed;
    ++k;
  }
  std::printf("hit ratio, cache-aware over round-robin: %.2fx\n", hit[1] > 0 ? hit[0] / hit[1] : 0.0);
  return kExitOk;
}

}  // namespace

Runner setup_bench_cluster(CLI::App& app) {
  auto o = std::make_shared<ClusterBenchOptions>();
  app.add_option("--workload", o->workload, "what a job is: a workflow run or a chat request")
      ->check(one_of({"runs", "chat"}))
      ->capture_default_str();
  app.add_option("--nodes", o->nodes, "`arbor node` processes")->check(integer_in(1, 16))->capture_default_str();
  app.add_option("--docs", o->docs, "distinct shared documents")->check(integer_in(1, 64))->capture_default_str();
  app.add_option("--requests", o->requests, "jobs per routing (runs or chat requests)")
      ->check(integer_in(1, 4096))
      ->capture_default_str();
  app.add_option("--agents", o->agents, "agents per workflow run (--workload runs)")
      ->check(integer_in(1, 16))
      ->capture_default_str();
  app.add_option("--concurrency", o->concurrency, "jobs in flight at once")
      ->check(integer_in(1, 256))
      ->capture_default_str();
  app.add_option("--max-tokens", o->max_tokens, "tokens generated per agent or request")
      ->check(integer_in(1, 1024))
      ->capture_default_str();
  app.add_option("--node-threads", o->node_threads, "compute threads per node")
      ->check(integer_in(1, 256))
      ->capture_default_str();
  app.add_option("--node-kv-mem", o->node_kv_mb, "KV pool per node, MiB")
      ->check(integer_in(1, 1 << 20))
      ->capture_default_str();
  declare_cluster_tls(app, o->tls);
  o->runtime.declare(app, kModelFlag);
  return [o] { return run(*o); };
}

}  // namespace arbor::cli

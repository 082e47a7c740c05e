// `arbor bench workflow`: N sub-agents fan out over one shared document (~1000
// tokens; --prefix-documents K puts K parts of it in the prefix, K = 4 for a ~4k-token
// SharedPrefix), each with its own ~64-token task, 32 generated tokens each; every N is
// run with the prefix cache on and off, side by side in one process. --temperature T
// samples (with top_p 0.95) instead of decoding greedily.
#include <algorithm>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "runtime/cli/bench.hpp"
#include "runtime/cli/command.hpp"
#include "runtime/cli/default_model.hpp"
#include "runtime/cli/options.hpp"
#include "runtime/cli/runtime_options.hpp"

namespace arbor::cli {
namespace {

const char* const kQuestions[] = {
    "Who built the first transistor, and when?", "Why did engineers want to replace vacuum tubes?",
    "What is a point-contact transistor?", "Why did silicon replace germanium?",
    "Who invented the integrated circuit?", "What is a MOSFET?", "What does Moore's law say?",
    "What is a FinFET?", "What was the transistor radio?", "What is a bipolar junction transistor?",
    "Where was the transistor invented?", "What did the planar process change?",
    "What is doping in a semiconductor?", "Why are transistors called switches?",
    "What limits how small a transistor can be?", "What is gate-all-around?"};

// The shared document comes from the research-team example (repeated as numbered parts
// for a longer prefix); the task pads each question with the same instructions, to
// about 64 tokens.
std::string workflow_json(int num_agents, int max_tokens, int documents, double temperature) {
  nlohmann::json questions = nlohmann::json::array();
  for (int i = 0; i < num_agents; ++i) questions.push_back(kQuestions[i % 16]);
  nlohmann::json parts = nlohmann::json::array();
  for (int i = 0; i < documents; ++i)
    parts.push_back({{"title", documents == 1 ? std::string("A short history of the transistor")
                                              : "A short history of the transistor, part " + std::to_string(i + 1)},
                     {"file", "docs/transistor_history.md"}});
  nlohmann::json wf = {
      {"name", "bench_fanout_" + std::to_string(num_agents)},
      {"tenant", "bench"},
      {"inputs", {{"questions", {{"default", questions}}}}},
      {"defaults",
       {{"generation", {{"max_tokens", max_tokens}, {"temperature", temperature}, {"top_p", temperature > 0 ? 0.95 : 1.0}}},
        {"timeout_ms", 600000}}},
      {"prefixes",
       {{"doc",
         {{"system", "You are a member of a research team. Answer only from the background document below."},
          {"documents", parts}}}}},
      {"agents",
       {{{"id", "agent"},
         {"prefix", "doc"},
         {"for_each", {{"input", "questions"}}},
         {"task",
          "You are researcher number {{index}} of the team. Your question is: {{item}}\n"
          "Answer it in two or three plain sentences, quoting the document where you can, "
          "without lists, headings or any text that is not part of the answer."}}}}};
  return wf.dump();
}

// Its TokenUsage: the cache's, computed_tokens with the warm-ups' (all prefill work).
struct Figures : TokenUsage {
  double wall_ms = 0, ttft_median_ms = 0, ttft_max_ms = 0, decode_tokens_per_s = 0;
  // The scheduler's host work between forwards: per batched step, and its share of the
  // steps' time (what a device would wait on unless steps overlap).
  double host_ms_per_step = 0, host_share = 0;
  std::uint64_t ideal_prefill = 0;  // P + sum of suffixes
  std::uint64_t graph_steps_replayed = 0, graph_steps_captured = 0;  // a device engine's (CacheStats)
};

Result<Figures> run_once(RuntimeConfig config, int num_agents, int max_tokens, int documents, double temperature,
                         const std::string& base_dir) {
  auto runtime = Runtime::create(config);
  if (!runtime) return std::unexpected(runtime.error());
  auto handle = (*runtime)->start(workflow_json(num_agents, max_tokens, documents, temperature),
                                 {.workflow_is_text = true, .documents = DocumentAccess::local_to(base_dir)});
  if (!handle) return std::unexpected(handle.error());
  const RunResult run = handle->wait();
  if (run.status != RunStatus::ok) return fail(ErrorCode::failed, "benchmark run failed: " + run.error);
  const CacheStats stats = (*runtime)->cache_stats();
  Figures f;
  f.wall_ms = run.wall_ms;
  f.usage() = stats.usage();
  f.computed_tokens += stats.warmup_tokens;  // all prefill work
  const double host_seconds = stats.host_seconds();
  if (stats.batched_steps > 0) f.host_ms_per_step = 1000.0 * host_seconds / double(stats.batched_steps);
  if (stats.step_seconds > 0) f.host_share = host_seconds / stats.step_seconds;
  f.graph_steps_replayed = stats.graph_steps_replayed;
  f.graph_steps_captured = stats.graph_steps_captured;
  std::vector<double> ttft;
  double decode_window_ms = 0;
  std::uint64_t shared = 0;  // the prefix every agent shares, in tokens: the longest hit
  for (const AgentResult& a : run.agents) {
    ttft.push_back(a.ttft_ms);
    decode_window_ms = std::max(decode_window_ms, a.duration_ms - a.ttft_ms);
    shared = std::max(shared, a.cached_tokens);
  }
  std::sort(ttft.begin(), ttft.end());
  f.ttft_median_ms = ttft[ttft.size() / 2];
  f.ttft_max_ms = ttft.back();
  f.decode_tokens_per_s = decode_window_ms > 0 ? 1000.0 * double(f.generated_tokens) / decode_window_ms : 0;
  // P + sum of suffixes: every prompt token once, except the shared prefix, counted
  // once instead of N times (meaningful for the cache-on run, whose hits give P).
  f.ideal_prefill = f.prompt_tokens - (run.agents.size() - 1) * shared;
  return f;
}

}  // namespace

namespace {

struct WorkflowOptions {
  std::string agents = "1,2,4,8,16";
  int max_tokens = 32;
  int documents = 1;  // parts of the background document in the shared prefix
  double temperature = 0;  // the agents' sampling (0: greedy)
  bool json = false;
  RuntimeOptions runtime;
};

int bench_workflow(const WorkflowOptions& o) {
  RuntimeConfig config;
  o.runtime.apply(config);
  const auto counts = parse_integer_list(o.agents);
  const int max_tokens = o.max_tokens;
  const std::string base_dir = find_project_file("workflows/examples");

  BenchReport report(o.json, {{"threads", config.num_threads},
                              {"precision", to_string(config.precision)},
                              {"prefix_documents", o.documents},
                              {"temperature", o.temperature}});
  report.header("%6s %5s %9s %8s %8s %9s %9s %9s %9s %10s %13s\n", "agents", "cache", "wall_ms", "prompt",
                "computed", "ideal", "ttft_med", "ttft_max", "decode/s", "speedup", "host_ms/step");
  for (int n : counts) {
    Figures on, off;
    for (bool cache : {true, false}) {
      config.prefix_caching = cache;
      auto f = run_once(config, n, max_tokens, o.documents, o.temperature, base_dir);
      if (!f) return std::fprintf(stderr, "arbor bench workflow: %s\n", f.error().describe().c_str()), kExitFailed;
      (cache ? on : off) = *f;
    }
    for (bool cache : {true, false}) {
      const Figures& f = cache ? on : off;
      const double speedup = off.wall_ms / on.wall_ms;
      report.add({{"agents", n}, {"cache", cache}, {"wall_ms", f.wall_ms}, {"prompt_tokens", f.prompt_tokens},
                  {"computed_tokens", f.computed_tokens}, {"ideal_prefill_tokens", on.ideal_prefill},
                  {"generated_tokens", f.generated_tokens}, {"ttft_median_ms", f.ttft_median_ms},
                  {"ttft_max_ms", f.ttft_max_ms}, {"decode_tokens_per_s", f.decode_tokens_per_s},
                  {"speedup_vs_no_cache", cache ? speedup : 1.0}, {"host_ms_per_step", f.host_ms_per_step},
                  {"host_share_of_step_time", f.host_share}, {"graph_steps_replayed", f.graph_steps_replayed},
                  {"graph_steps_captured", f.graph_steps_captured}},
                 "%6d %5s %9.0f %8llu %8llu %9llu %9.0f %9.0f %9.1f %10s %6.3f (%2.0f%%)\n", n, cache ? "on" : "off",
                 f.wall_ms, (unsigned long long)f.prompt_tokens, (unsigned long long)f.computed_tokens,
                 (unsigned long long)on.ideal_prefill, f.ttft_median_ms, f.ttft_max_ms, f.decode_tokens_per_s,
                 cache ? (std::to_string(speedup).substr(0, 4) + "x").c_str() : "", f.host_ms_per_step,
                 100.0 * f.host_share);
    }
  }
  return report.finish();
}

}  // namespace

Runner setup_bench_workflow(CLI::App& app) {
  auto o = std::make_shared<WorkflowOptions>();
  declare_bench_counts(app, "--agents", o->agents, "sub-agent counts");
  declare_bench_max_tokens(app, o->max_tokens);
  app.add_option("--prefix-documents", o->documents,
                 "parts of the ~1,040-token background document in the shared prefix (4: a ~4.2k-token prefix)")
      ->type_name("K")
      ->check(integer_in(1, 16))
      ->capture_default_str();
  app.add_option("--temperature", o->temperature, "the agents' sampling temperature, with top_p 0.95 (0: greedy)")
      ->check(CLI::Range(0.0, 2.0))
      ->capture_default_str();
  declare_bench_json(app, o->json);
  o->runtime.declare(app);
  app.get_option("--no-cache")->description("ignored: every count is measured with the prefix cache on and off");
  return [o] { return bench_workflow(*o); };
}

}  // namespace arbor::cli

// `arbor bench tools`: KV retention during tool calls (RuntimeConfig::tool_pin_ttl_ms).
// The same workflow runs twice on a fresh runtime each, with the tool pin and without:
// agents read one long shared document, each calls a tool, and the tool's handler
// stands for the rest of a busy server: it runs --pressure other generations (another
// tenant, distinct prompts) that fill the small KV pool while the agent waits. Printed
// side by side: the prompt tokens the agents prefilled again after the tool results
// beyond the new messages (tool_recomputed_tokens; the partial-page minimum with the
// pin), pages evicted, the run's wall time and that time minus the tool time.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "runtime/cli/bench.hpp"
#include "runtime/cli/command.hpp"
#include "runtime/cli/options.hpp"
#include "runtime/cli/pressure.hpp"
#include "runtime/cli/runtime_options.hpp"

namespace arbor::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct ToolsOptions {
  int agents = 1;
  int pressure = 12;  // other generations per tool call
  int max_tokens = 16;
  int ttl_ms = 30000;
  bool json = false;
  RuntimeOptions runtime;
};

std::string document() {
  std::string d = "Harbour log. ";
  for (int i = 0; i < 24; ++i)
    d += "Entry " + std::to_string(i) + ": light " + std::to_string(i * 7 % 41) + " was checked and found working. ";
  return d;
}

std::string workflow(const ToolsOptions& o) {
  nlohmann::json agents = nlohmann::json::array();
  for (int i = 0; i < o.agents; ++i)
    agents.push_back({{"id", "agent" + std::to_string(i)},
                      {"prefix", "log"},
                      {"task", "Question " + std::to_string(i) + ": look up the keeper of light " + std::to_string(i) +
                                   " with the tool, then answer in one sentence."},
                      {"tools", {"lookup"}},
                      {"tool_choice", "required"},
                      {"max_tool_calls", 1},
                      {"tool_timeout_ms", 3600000},
                      {"generation", {{"max_tokens", o.max_tokens}, {"temperature", 0}}}});
  return nlohmann::json{{"name", "bench-tools"},
                        {"prefixes", {{"log", {{"system", "You answer questions about this log.\n" + document()}}}}},
                        {"agents", agents}}
      .dump();
}

// The tool: the other tenant's generations, then an answer.
Result<std::string> pressure(Runtime& rt, int count, std::atomic<int>& serial) {
  for (int k = 0; k < count; ++k) {
    const int n = serial++;  // distinct prompts: nothing shared between them
    if (auto r = rt.generate(pressure_request("other", n)); !r) return std::unexpected(r.error());
  }
  return std::string("the keeper is Ada");
}

struct Figures {
  TokenUsage agents;  // the agents' sums
  std::size_t recomputed = 0;
  int tool_calls = 0;
  double tool_ms = 0, wall_s = 0;
  std::uint64_t evictions = 0;
};

Result<Figures> measure(const ToolsOptions& o, int ttl_ms) {
  RuntimeConfig config;
  config.kv_memory_mb = 48;  // small: the pressure fills it (--kv-mem overrides)
  o.runtime.apply(config);
  config.tool_pin_ttl_ms = ttl_ms;
  auto rt = Runtime::create(config);
  if (!rt) return std::unexpected(rt.error());
  Runtime& r = **rt;
  auto serial = std::make_shared<std::atomic<int>>(0);  // handlers of several agents may overlap
  const int count = o.pressure;
  if (auto ok = r.add_tool({"lookup", "Looks up who keeps a light.",
                            R"({"type":"object","properties":{"light":{"type":"integer"}},"required":["light"]})",
                            [&r, count, serial](const nlohmann::ordered_json&) { return pressure(r, count, *serial); }});
      !ok)
    return std::unexpected(ok.error());
  const auto t0 = Clock::now();
  RunOptions run_options;
  run_options.workflow_is_text = true;
  auto h = r.start(workflow(o), std::move(run_options));
  if (!h) return std::unexpected(h.error());
  const RunResult run = h->wait();
  Figures f;
  f.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (run.status != RunStatus::ok)
    return fail(ErrorCode::failed, std::string("the run ended ") + to_string(run.status) + ": " + run.error);
  for (const auto& a : run.agents) {
    f.agents += a.usage();
    f.recomputed += a.tool_recomputed_tokens;
    f.tool_calls += a.tool_calls;
    f.tool_ms += a.tool_ms;
  }
  f.evictions = r.cache_stats().evictions;
  return f;
}

int bench_tools(const ToolsOptions& o) {
  BenchReport report(o.json, {{"agents", o.agents}, {"pressure", o.pressure}});
  report.header("%-16s %6s %11s %14s %14s %10s %8s %14s\n", "tool pin", "calls", "recomputed", "agent computed",
                "agent cached", "evictions", "wall s", "wall-tools s");
  for (int ttl : {o.ttl_ms, 0}) {
    auto f = measure(o, ttl);
    if (!f) return std::fprintf(stderr, "arbor bench tools: %s\n", f.error().describe().c_str()), kExitFailed;
    // Tool time overlaps between agents; with one agent wall - tool is the model's time.
    const double outside = f->wall_s - f->tool_ms / 1000.0 / std::max(o.agents, 1);
    const std::string label = ttl > 0 ? "ttl " + std::to_string(ttl) + " ms" : "off (ttl 0)";
    report.add({{"tool_pin_ttl_ms", ttl}, {"tool_calls", f->tool_calls}, {"tool_recomputed_tokens", f->recomputed},
                {"computed_tokens", f->agents.computed_tokens}, {"cached_tokens", f->agents.cached_tokens},
                {"evicted_pages", f->evictions}, {"wall_s", f->wall_s}, {"wall_minus_tools_s", outside}},
               "%-16s %6d %11zu %14llu %14llu %10llu %8.2f %14.2f\n", label.c_str(), f->tool_calls, f->recomputed,
               static_cast<unsigned long long>(f->agents.computed_tokens),
               static_cast<unsigned long long>(f->agents.cached_tokens),
               static_cast<unsigned long long>(f->evictions), f->wall_s, outside);
  }
  return report.finish();
}

}  // namespace

Runner setup_bench_tools(CLI::App& app) {
  auto o = std::make_shared<ToolsOptions>();
  app.add_option("--agents", o->agents, "agents, each calling the tool once")
      ->type_name("N")
      ->check(integer_in(1, 64))
      ->capture_default_str();
  app.add_option("--pressure", o->pressure, "other generations (about 200 tokens each) run by each tool call")
      ->type_name("N")
      ->check(integer_in(0, 1000))
      ->capture_default_str();
  app.add_option("--ttl", o->ttl_ms, "the tool pin's TTL of the pinned run, ms (the other run uses 0)")
      ->type_name("MS")
      ->check(integer_in(1, 3600000))
      ->capture_default_str();
  declare_bench_max_tokens(app, o->max_tokens);
  declare_bench_json(app, o->json);
  o->runtime.declare(app, kModelFlag | kDeviceFlag | kThreadsFlag | kKvMemFlag | kPageSizeFlag | kEvictionFlag |
                              kPrecisionFlag);
  return [o] { return bench_tools(*o); };
}

}  // namespace arbor::cli

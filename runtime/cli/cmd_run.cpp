// `arbor run WF.json [WF2.json ...]`: runs workflows concurrently in one runtime and
// one cache. On a terminal it shows live progress; --json prints one document.
// Exit codes: 0 every run ok, 1 a run failed, 2 invalid input.
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stop_token>
#include <thread>

#include <nlohmann/json.hpp>

#include "runtime/cli/command.hpp"
#include "runtime/cli/progress.hpp"
#include "runtime/cli/runtime_options.hpp"
#include "runtime/cli/workflow_inputs.hpp"
#include "workflows/plan.hpp"

namespace arbor::cli {
namespace {

struct RunOptions {
  std::vector<std::string> workflows;
  std::vector<std::string> inputs;
  bool json = false;
  RuntimeOptions runtime;
};

// Redraws the progress line on stderr every 250 ms until stopped (a terminal only).
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : tracker_(ProgressClock::now()) {
    if (enabled)
      thread_ = std::jthread([this](std::stop_token stop) {
        std::mutex mu;
        std::condition_variable_any cv;
        std::unique_lock lock(mu);
        while (!stop.stop_requested()) {
          cv.wait_for(lock, stop, std::chrono::milliseconds(250), [] { return false; });  // wakes on stop
          if (!stop.stop_requested()) draw();
        }
      });
  }
  ProgressTracker& tracker() { return tracker_; }
  void finish() {
    if (!thread_.joinable()) return;
    thread_.request_stop();
    thread_.join();
    draw();
    std::fprintf(stderr, "\n");
  }

 private:
  void draw() {
    const std::string line = format_progress(tracker_.counts(ProgressClock::now()));
    std::fprintf(stderr, "\r%s\033[K", line.c_str());  // \033[K: erase the rest of a longer old line
    std::fflush(stderr);
  }
  ProgressTracker tracker_;
  std::jthread thread_;
};

// Messages of the runtime name configuration fields; on the command line, the flags.
void reword_errors(RunResult& run) {
  run.error = cli_wording(run.error);
  for (AgentResult& a : run.agents) a.error = cli_wording(a.error);
}

void print_text_report(const RunResult& run) {
  std::printf("== %s (tenant %s): %s in %.0f ms\n", run.workflow.c_str(), run.tenant.c_str(), to_string(run.status),
              run.wall_ms);
  if (!run.error.empty()) std::printf("   error: %s\n", run.error.c_str());
  for (const AgentResult& a : run.agents) {
    std::printf("-- %s [%s] prompt %zu (cached %zu, computed %zu), generated %zu, %.0f ms\n", a.id.c_str(),
                to_string(a.status), a.prompt_tokens, a.cached_tokens, a.computed_tokens, a.generated_tokens,
                a.duration_ms);
    if (a.warmup_tokens > 0) std::printf("   warm-up: prefilled %zu prefix tokens for its sub-agents\n", a.warmup_tokens);
    for (const ToolCallInfo& t : a.tool_trace)
      std::printf("   tool %s %s: %s in %.0f ms (%zu bytes)\n", t.name.c_str(), t.arguments.c_str(),
                  to_string(t.status), t.ms, t.result.size());
    if (!a.error.empty()) std::printf("   error: %s\n", a.error.c_str());
    if (!a.output.empty()) std::printf("   %s\n", a.output.c_str());
  }
}

int run_workflows(const RunOptions& o) {
  auto inputs = workflows::parse_input_overrides(o.inputs);
  if (!inputs) return std::fprintf(stderr, "arbor run: %s\n", inputs.error().message.c_str()), kExitInvalid;
  std::vector<std::optional<std::set<std::string>>> declared;
  for (const std::string& path : o.workflows) declared.push_back(declared_inputs(path));
  auto routed = route_inputs(o.workflows, declared, *inputs);
  if (!routed) return std::fprintf(stderr, "arbor run: %s\n", routed.error().message.c_str()), kExitInvalid;
  RuntimeConfig config;
  o.runtime.apply(config);

  auto runtime = Runtime::create(config);
  if (!runtime)
    return std::fprintf(stderr, "arbor: %s\n", cli_wording(runtime.error().describe()).c_str()), kExitInvalid;
  print_device_line("run", **runtime);
  ProgressLine progress(!o.json && isatty(STDERR_FILENO));
  // Each run's tool calls and results, in order, for --json (events arrive on runtime threads).
  std::mutex tool_mu;
  std::vector<nlohmann::ordered_json> tool_events(o.workflows.size(), nlohmann::ordered_json::array());
  std::vector<RunHandle> handles;
  for (std::size_t i = 0; i < o.workflows.size(); ++i) {
    auto on_event = [&progress, &tool_mu, &tool_events, i](const Event& e) {
      progress.tracker().on_event(e, ProgressClock::now());
      if (e.kind != Event::Kind::tool_call && e.kind != Event::Kind::tool_result) return;
      std::lock_guard lock(tool_mu);
      tool_events[i].push_back(event_json(e));
    };
    auto handle = (*runtime)->start(o.workflows[i], {.inputs = (*routed)[i], .on_event = on_event});
    if (!handle) {
      for (RunHandle& h : handles) h.cancel();
      for (RunHandle& h : handles) h.wait();
      progress.finish();
      std::fprintf(stderr, "arbor run: %s\n", handle.error().message.c_str());
      return handle.error().code == ErrorCode::invalid_argument || handle.error().code == ErrorCode::not_found
                 ? kExitInvalid
                 : kExitFailed;
    }
    std::vector<std::string> ids;
    for (const auto& a : handle->snapshot().agents) ids.push_back(a.id);
    progress.tracker().add_agents(handle->id(), ids);
    handles.push_back(*handle);
  }
  std::vector<RunResult> results;
  for (RunHandle& h : handles) results.push_back(h.wait());
  progress.finish();

  bool all_ok = true;
  for (RunResult& r : results) {
    all_ok = all_ok && r.status == RunStatus::ok;
    reword_errors(r);
  }
  if (o.json) {
    nlohmann::json doc = {{"runs", nlohmann::json::array()}};
    for (std::size_t i = 0; i < results.size(); ++i) {
      auto run = nlohmann::json::parse(to_json(results[i]));
      run["tool_events"] = nlohmann::json::parse(tool_events[i].dump());
      doc["runs"].push_back(std::move(run));
    }
    doc["cache"] = nlohmann::json::parse(to_json((*runtime)->cache_stats()));
    std::printf("%s\n", doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    for (const RunResult& r : results) print_text_report(r);
    const CacheStats s = (*runtime)->cache_stats();
    std::printf("== cache: %llu prompt tokens, %llu cached (hit ratio %.2f), %llu computed; pages %d/%d used, %d locked, %llu evicted\n",
                (unsigned long long)s.prompt_tokens, (unsigned long long)s.cached_tokens, s.hit_ratio,
                (unsigned long long)s.computed_tokens, s.pages_used, s.pages_total, s.pages_locked,
                (unsigned long long)s.evictions);
  }
  return all_ok ? kExitOk : kExitFailed;
}

// The built-in generation settings a workflow's agents get where it sets none.
std::string generation_defaults_text() {
  const SamplingSettings g;
  char text[512];
  std::snprintf(text, sizeof text,
                "Agents generate with the workflow's \"generation\" settings (defaults.generation, then the agent's);\n"
                "unset ones are max_tokens %d, temperature %g (greedy), top_p %g, top_k %d (off), seed %llu.\n",
                g.max_tokens, g.temperature, g.top_p, g.top_k, (unsigned long long)g.seed);
  return text;
}

Runner setup(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  app.add_option("workflows", o->workflows, "workflow files (JSON), run concurrently in one runtime and one cache")
      ->type_name("WF.json")
      ->required();
  declare_input_option(app, o->inputs);
  app.add_flag("--json", o->json,
               "print one JSON document {\"runs\": [...], \"cache\": {...}} instead of the text report "
               "(and no progress line)");
  o->runtime.declare(app);
  app.footer(
      std::string("With several workflows, each gets the --input values it declares; an input that none declares is an error.\n")
      + generation_defaults_text() +
      "On a terminal, a progress line on stderr shows agents (total, running, done, failed, waiting),\n"
      "tokens/s over the last second and the cache hit ratio.\n"
      "Exit codes: 0 every run ok, 1 a run failed, 2 invalid input (flags, inputs, workflow files).");
  return [o] { return run_workflows(*o); };
}

ARBOR_CLI_COMMAND("run", "run workflows (JSON) concurrently on one runtime and cache", setup);

}  // namespace
}  // namespace arbor::cli

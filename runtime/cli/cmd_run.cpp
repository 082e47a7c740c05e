// `arbor run WF.json [WF2.json ...]`: runs workflows concurrently in one runtime and
// one cache. On a terminal it shows live progress; --json prints one document.
// Exit codes: 0 every run ok, 1 a run failed, 2 invalid input.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>

#include <nlohmann/json.hpp>

#include "runtime/cli/command.hpp"
#include "runtime/cli/runtime_options.hpp"

namespace arbor::cli {
namespace {

void print_usage() {
  std::fprintf(stderr,
               "usage: arbor run WF.json [WF2.json ...] [--input k=v ...] [--json] [--no-cache]\n"
               "                 [--kv-mem MB] [--page-size N] [--eviction lru|lfu|workflow]\n"
               "                 [--threads N] [--model PATH] [--precision accurate|fast]\n");
}

// Live one-line progress on stderr: agents running/done, decode tokens/s, hit rate.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), start_(std::chrono::steady_clock::now()) {}

  void on_event(const Event& e) {
    if (!enabled_) return;
    std::lock_guard lock(mu_);
    switch (e.kind) {
      case Event::Kind::agent_started: ++running_; break;
      case Event::Kind::agent_finished:
        --running_;
        ++done_;
        hit_ratio_ = e.cache.hit_ratio;
        break;
      case Event::Kind::token: ++tokens_; break;
      default: break;
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::fprintf(stderr, "\r[arbor] agents running %d, done %d | %.1f tokens/s | cache hit %.0f%%   ", running_,
                 done_, secs > 0 ? double(tokens_) / secs : 0.0, 100.0 * hit_ratio_);
  }
  void finish() {
    if (enabled_) std::fprintf(stderr, "\n");
  }

 private:
  bool enabled_;
  std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  int running_ = 0, done_ = 0;
  long tokens_ = 0;
  double hit_ratio_ = 0;
};

bool parse_inputs(const Args& args, std::map<std::string, std::string>& inputs, std::string* error) {
  for (const std::string& kv : args.get_all("input")) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      *error = "--input expects key=value, got '" + kv + "'";
      return false;
    }
    inputs[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return true;
}

void print_text_report(const RunResult& run) {
  std::printf("== %s (tenant %s): %s in %.0f ms\n", run.workflow.c_str(), run.tenant.c_str(), run.status.c_str(),
              run.wall_ms);
  if (!run.error.empty()) std::printf("   error: %s\n", run.error.c_str());
  for (const AgentResult& a : run.agents) {
    std::printf("-- %s [%s] prompt %zu (cached %zu, computed %zu), generated %zu, %.0f ms\n", a.id.c_str(),
                a.status.c_str(), a.prompt_tokens, a.cached_tokens, a.computed_tokens, a.generated_tokens,
                a.duration_ms);
    if (!a.error.empty()) std::printf("   error: %s\n", a.error.c_str());
    if (!a.output.empty()) std::printf("   %s\n", a.output.c_str());
  }
}

int run_workflows(const std::vector<std::string>& argv) {
  std::string error;
  auto args = Args::parse(argv, {"json", "no-cache", "help"}, &error);
  if (!args || args->has("help")) return print_usage(), args ? kExitOk : kExitInvalid;
  std::vector<std::string> known = {"input", "json", "help"};
  for (const auto& n : runtime_option_names()) known.push_back(n);
  if (auto bad = args->unknown(known); !bad.empty())
    return std::fprintf(stderr, "arbor run: unknown option %s\n", bad[0].c_str()), print_usage(), kExitInvalid;
  if (args->positional().empty()) return std::fprintf(stderr, "arbor run: no workflow given\n"), print_usage(), kExitInvalid;
  std::map<std::string, std::string> inputs;
  RuntimeConfig config;
  if (!parse_inputs(*args, inputs, &error) || !runtime_config_from(*args, config, &error))
    return std::fprintf(stderr, "arbor run: %s\n", error.c_str()), kExitInvalid;

  auto runtime = Runtime::create(config);
  if (!runtime) return std::fprintf(stderr, "arbor: %s\n", runtime.error().describe().c_str()), kExitInvalid;
  const bool json = args->has("json");
  Progress progress(!json && isatty(STDERR_FILENO));
  std::vector<RunHandle> handles;
  for (const std::string& path : args->positional()) {
    auto handle = (*runtime)->start(path, inputs, [&progress](const Event& e) { progress.on_event(e); });
    if (!handle) {
      for (RunHandle& h : handles) h.cancel();
      std::fprintf(stderr, "arbor run: %s\n", handle.error().message.c_str());
      return handle.error().code == ErrorCode::invalid_argument || handle.error().code == ErrorCode::not_found
                 ? kExitInvalid
                 : kExitFailed;
    }
    handles.push_back(*handle);
  }
  std::vector<RunResult> results;
  for (RunHandle& h : handles) results.push_back(h.wait());
  progress.finish();

  bool all_ok = true;
  for (const RunResult& r : results) all_ok = all_ok && r.status == "ok";
  if (json) {
    nlohmann::json doc = {{"runs", nlohmann::json::array()}};
    for (const RunResult& r : results) doc["runs"].push_back(nlohmann::json::parse(to_json(r)));
    doc["cache"] = nlohmann::json::parse(to_json((*runtime)->cache_stats()));
    std::printf("%s\n", doc.dump(2).c_str());
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

ARBOR_CLI_COMMAND("run", "run workflows (JSON) concurrently on one runtime and cache", run_workflows);

}  // namespace
}  // namespace arbor::cli

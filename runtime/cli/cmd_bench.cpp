#include <cstdarg>
#include <cstdio>
#include <map>
#include <memory>

#include "runtime/cli/bench.hpp"
#include "runtime/cli/options.hpp"

namespace arbor::cli {

void declare_bench_max_tokens(CLI::App& app, int& max_tokens) {
  app.add_option("--max-tokens", max_tokens, "tokens generated per agent or request (greedy)")
      ->type_name("N")
      ->check(integer_in(1, 1024))
      ->capture_default_str();
}

void declare_bench_counts(CLI::App& app, const std::string& flag, std::string& counts, const std::string& what) {
  app.add_option(flag, counts, what + " to measure, a comma list")
      ->type_name("N,N,...")
      ->check(integer_list_in(1, 64))
      ->capture_default_str();
}

void declare_bench_json(CLI::App& app, bool& json) {
  app.add_flag("--json", json, "print the figures as one JSON document");
}

BenchReport::BenchReport(bool json, nlohmann::json head) : json_(json), doc_(std::move(head)) {
  doc_["runs"] = nlohmann::json::array();
}

void BenchReport::header(const char* format, ...) {
  if (json_) return;
  va_list args;
  va_start(args, format);
  std::vprintf(format, args);
  va_end(args);
}

void BenchReport::add(nlohmann::json run, const char* format, ...) {
  if (json_) {
    doc_["runs"].push_back(std::move(run));
    return;
  }
  va_list args;
  va_start(args, format);
  std::vprintf(format, args);
  va_end(args);
  std::fflush(stdout);
}

int BenchReport::finish() const {
  if (json_) std::printf("%s\n", doc_.dump(2).c_str());
  return kExitOk;
}

namespace {

Runner setup(CLI::App& app) {
  auto runners = std::make_shared<std::map<const CLI::App*, Runner>>();
  auto add = [&](const char* name, const char* summary, Runner (*declare)(CLI::App&)) {
    CLI::App* sub = app.add_subcommand(name, summary);
    (*runners)[sub] = declare(*sub);
    sub->footer("Exit codes: 0 ok, 1 a measurement failed, 2 invalid input.");
  };
  add("engine", "the forward engine: pp512, tg128, batched decode (accurate and fast activations)",
      setup_bench_engine);
  add("workflow", "N sub-agents over one shared document, prefix cache on and off", setup_bench_workflow);
  add("serve", "the HTTP server: streaming clients, prefix cache on and off", setup_bench_serve);
  add("constrained", "constrained decoding (a JSON Schema) vs free text through the scheduler, per batch size",
      setup_bench_constrained);
  add("tools", "KV retention during tool calls: recomputed tokens and time with the tool pin and without",
      setup_bench_tools);
  add("cluster", "cache-aware vs round-robin routing over `arbor node` processes: computed tokens, hit ratio",
      setup_bench_cluster);
  app.require_subcommand(1);
  app.footer("Figures for BENCHMARKS.md; `arbor bench WHAT --help` for each one's options.");
  CLI::App* bench = &app;
  return [runners, bench] {
    for (const CLI::App* sub : bench->get_subcommands()) return (*runners)[sub]();
    return kExitInvalid;  // unreachable: CLI11 requires one
  };
}

ARBOR_CLI_COMMAND("bench",
                  "benchmarks: engine (pp512, tg128, batched decode), workflow (N sub-agents, cache on/off), "
                  "serve (streaming HTTP clients, cache on/off), constrained (JSON Schema vs free), tools (tool pin on/off)",
                  setup);

}  // namespace
}  // namespace arbor::cli

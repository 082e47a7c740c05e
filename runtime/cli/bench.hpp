// `arbor bench <what>`: benchmark subcommands. Each prints figures (tokens/s, ratios)
// for BENCHMARKS.md; none asserts on time. Each declares its options on its own
// sub-subcommand app and returns its runner (see command.hpp).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "runtime/cli/command.hpp"

namespace arbor::cli {

Runner setup_bench_engine(CLI::App& app);
Runner setup_bench_workflow(CLI::App& app);
Runner setup_bench_serve(CLI::App& app);
Runner setup_bench_constrained(CLI::App& app);
Runner setup_bench_tools(CLI::App& app);
Runner setup_bench_cluster(CLI::App& app);

// --max-tokens of the workflow and serve benchmarks: tokens generated per agent or
// request.
void declare_bench_max_tokens(CLI::App& app, int& max_tokens);

// A comma list of counts to measure, each in 1..64 (--agents, --batch, --clients).
void declare_bench_counts(CLI::App& app, const std::string& flag, std::string& counts, const std::string& what);

// --json of every benchmark.
void declare_bench_json(CLI::App& app, bool& json);

// What a benchmark prints: a table on stdout (a header line, then a line per
// measurement, flushed as it comes) or, with --json, one document printed at the end:
// `head` plus "runs", the measurements in order.
class BenchReport {
 public:
  BenchReport(bool json, nlohmann::json head);
  // The table's header line (printf format); nothing with --json.
  void header(const char* format, ...) __attribute__((format(printf, 2, 3)));
  // One measurement: `run` with --json, else the line (printf format).
  void add(nlohmann::json run, const char* format, ...) __attribute__((format(printf, 3, 4)));
  // Prints the document (--json); returns kExitOk.
  int finish() const;

 private:
  bool json_;
  nlohmann::json doc_;
};

}  // namespace arbor::cli

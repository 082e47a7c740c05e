// `arbor bench <what>`: benchmark subcommands. Each prints figures (tokens/s, ratios)
// for BENCHMARKS.md; none asserts on time. Each declares its options on its own
// sub-subcommand app and returns its runner (see command.hpp).
#pragma once

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

}  // namespace arbor::cli

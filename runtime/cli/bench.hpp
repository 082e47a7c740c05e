// `arbor bench <what>`: benchmark subcommands. Each prints figures (tokens/s, ratios)
// for BENCHMARKS.md; none asserts on time.
#pragma once

#include <string>
#include <vector>

namespace arbor::cli {

int bench_engine(const std::vector<std::string>& args);
int bench_workflow(const std::vector<std::string>& args);
int bench_serve(const std::vector<std::string>& args);

}  // namespace arbor::cli

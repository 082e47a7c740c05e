#include <cstdio>

#include "runtime/cli/bench.hpp"
#include "runtime/cli/command.hpp"

namespace arbor::cli {
namespace {

int run_bench(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help") {
    std::printf(
        "usage: arbor bench engine   [--model PATH] [--threads N] [--reps N] [--precision accurate|fast] [--json]\n");
    return args.empty() ? kExitInvalid : kExitOk;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "engine") return bench_engine(rest);
  std::fprintf(stderr, "arbor bench: unknown benchmark '%s' (engine)\n", args[0].c_str());
  return kExitInvalid;
}

ARBOR_CLI_COMMAND("bench", "benchmarks: engine (pp512, tg128, batched decode)",
                  run_bench);

}  // namespace
}  // namespace arbor::cli

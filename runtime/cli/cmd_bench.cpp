#include <cstdio>

#include "runtime/cli/bench.hpp"
#include "runtime/cli/command.hpp"

namespace arbor::cli {
namespace {

int run_bench(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help") {
    std::printf(
        "usage: arbor bench engine   [--model PATH] [--threads N] [--reps N] [--precision accurate|fast] [--json]\n"
        "       arbor bench workflow [--agents 1,2,4,8,16] [--max-tokens 32] [--threads N] [--precision P] [--json]\n"
        "       arbor bench serve    [--clients 1,8,32] [--requests-per-client N] [--max-tokens 32] [--threads N]\n"
        "                            [--precision P] [--json]   (HTTP server, streaming clients, cache on/off)\n");
    return args.empty() ? kExitInvalid : kExitOk;
  }
  const std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "engine") return bench_engine(rest);
  if (args[0] == "workflow") return bench_workflow(rest);
  if (args[0] == "serve") return bench_serve(rest);
  std::fprintf(stderr, "arbor bench: unknown benchmark '%s' (engine, workflow, serve)\n", args[0].c_str());
  return kExitInvalid;
}

ARBOR_CLI_COMMAND("bench",
                  "benchmarks: engine (pp512, tg128, batched decode), workflow (N sub-agents, cache on/off), "
                  "serve (streaming HTTP clients, cache on/off)",
                  run_bench);

}  // namespace
}  // namespace arbor::cli

// `arbor validate WF.json [--input k=v ...]`: load and check a workflow without running it.
#include <cstdio>

#include "runtime/cli/command.hpp"
#include "workflows/workflow.hpp"

namespace arbor::cli {
namespace {

int run_validate(const std::vector<std::string>& argv) {
  std::string error;
  auto args = Args::parse(argv, {"help"}, &error);
  if (!args) return std::fprintf(stderr, "arbor validate: %s\n", error.c_str()), kExitInvalid;
  if (args->has("help") || args->positional().size() != 1) {
    std::fprintf(args->has("help") ? stdout : stderr,
                 "usage: arbor validate WORKFLOW.json [--input KEY=VALUE ...]\n"
                 "Checks a workflow (types, references, templates, cycles, prefix files) and\n"
                 "prints its shape and layout warnings. Exit 0 valid, 2 invalid.\n");
    return args->has("help") ? kExitOk : kExitInvalid;
  }
  if (auto unknown = args->unknown({"input", "help"}); !unknown.empty())
    return std::fprintf(stderr, "arbor validate: unknown option %s (try --help)\n", unknown[0].c_str()),
           kExitInvalid;
  auto overrides = workflows::parse_input_overrides(args->get_all("input"));
  if (!overrides)
    return std::fprintf(stderr, "arbor validate: %s\n", overrides.error().message.c_str()), kExitInvalid;
  auto plan = workflows::load_workflow_file(args->positional()[0], *overrides);
  if (!plan) {
    std::fputs(plan.error().format().c_str(), stderr);
    std::fprintf(stderr, "%zu error(s)\n", plan.error().num_errors());
    return kExitInvalid;
  }
  std::printf("ok: %s: %zu agents, %zu shared prefixes\n", plan->name.c_str(), plan->num_agents(),
              plan->prefixes.size());
  for (const auto& w : plan->warnings) std::printf("%s\n", w.format(args->positional()[0]).c_str());
  return kExitOk;
}

}  // namespace

ARBOR_CLI_COMMAND("validate", "check a workflow file and print its shape and layout warnings", run_validate);

}  // namespace arbor::cli

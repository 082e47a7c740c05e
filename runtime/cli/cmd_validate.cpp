// `arbor validate WF.json [--input k=v ...]`: load and check a workflow without running it.
#include <cstdio>
#include <memory>

#include "runtime/cli/command.hpp"
#include "runtime/cli/workflow_inputs.hpp"
#include "workflows/tools.hpp"
#include "workflows/workflow.hpp"

namespace arbor::cli {
namespace {

struct ValidateOptions {
  std::string workflow;
  std::vector<std::string> inputs;
};

int run_validate(const ValidateOptions& o) {
  auto overrides = workflows::parse_input_overrides(o.inputs);
  if (!overrides)
    return std::fprintf(stderr, "arbor validate: %s\n", overrides.error().message.c_str()), kExitInvalid;
  auto plan = workflows::load_workflow_file(o.workflow, *overrides);
  if (!plan) {
    std::fputs(plan.error().format().c_str(), stderr);
    std::fprintf(stderr, "%zu error(s)\n", plan.error().num_errors());
    return kExitInvalid;
  }
  // The tools `arbor run` knows: the built-ins (an embedding application's own tools
  // are checked by Runtime::start).
  if (auto tools = workflows::check_agent_tools(*plan, workflows::ToolRegistry::builtins(), o.workflow);
      tools.has_errors()) {
    std::fputs(tools.format().c_str(), stderr);
    std::fprintf(stderr, "%zu error(s)\n", tools.num_errors());
    return kExitInvalid;
  }
  // A for_each.output template counts as one agent: its instances exist only at run time.
  std::printf("ok: %s: %zu agents%s, %zu shared prefixes\n", plan->name.c_str(), plan->num_agents(),
              plan->has_dynamic_fan_out() ? " (plus the instances of a fan-out decided at run time)" : "",
              plan->prefixes.size());
  for (const auto& w : plan->warnings) std::printf("%s\n", w.format(o.workflow).c_str());
  return kExitOk;
}

Runner setup(CLI::App& app) {
  auto o = std::make_shared<ValidateOptions>();
  app.add_option("workflow", o->workflow, "the workflow file (JSON)")->type_name("WF.json")->required();
  declare_input_option(app, o->inputs);
  app.footer(
      "Checks a workflow (types, references, templates, cycles, prefix files) and prints its shape and\n"
      "layout warnings. Exit codes: 0 valid, 2 invalid.");
  return [o] { return run_validate(*o); };
}

}  // namespace

ARBOR_CLI_COMMAND("validate", "check a workflow file and print its shape and layout warnings", setup);

}  // namespace arbor::cli

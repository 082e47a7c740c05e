// Runtime::add_tool and the tools a run's agents get (runtime_impl.hpp: attach_tools).
#include <filesystem>

#include "actors/run_env.hpp"
#include "runtime/runtime_impl.hpp"

namespace arbor {
namespace {

// read_file's folder: the workflow file's own folder, or for a workflow given as text
// the folder its documents may come from; always confined (the model picks the path).
DocumentAccess tool_files(bool is_text, const std::string& workflow, const DocumentAccess& documents) {
  if (!is_text) {
    auto dir = std::filesystem::path(workflow).parent_path();
    return DocumentAccess::confined_to(dir.empty() ? "." : dir.string());
  }
  if (documents.mode == DocumentAccess::Mode::none || documents.dir.empty()) return DocumentAccess::no_files();
  return DocumentAccess::confined_to(documents.dir, documents.deny);
}

}  // namespace

Result<void> attach_tools(Runtime::Impl& impl, actors::RunEnv& env, bool is_text, const std::string& workflow,
                          const DocumentAccess& documents) {
  {
    std::lock_guard lock(impl.mu);
    env.tools = impl.tools;
  }
  auto unknown = workflows::check_agent_tools(*env.plan, *env.tools, is_text ? "<text>" : workflow);
  if (unknown.has_errors()) return fail(ErrorCode::invalid_argument, unknown.format());
  env.tool_runner = impl.tool_runner;
  env.tool_context.files = tool_files(is_text, workflow, documents);
  return {};
}

Result<void> Runtime::add_tool(ToolDefinition tool) {
  workflows::Tool t;
  t.signature = {std::move(tool.name), std::move(tool.description), std::move(tool.parameters)};
  if (tool.handler) {
    t.handler = [handler = std::move(tool.handler)](const model::Json& arguments,
                                                     const workflows::ToolContext&) -> workflows::ToolOutput {
      auto out = handler(arguments);
      if (!out) return std::unexpected(out.error().message);
      return *std::move(out);
    };
  }
  std::lock_guard lock(impl_->mu);
  auto next = std::make_shared<workflows::ToolRegistry>(*impl_->tools);
  if (auto ok = next->add(std::move(t)); !ok) return ok;
  impl_->tools = std::move(next);
  return {};
}

std::vector<std::string> Runtime::tool_names() const {
  std::lock_guard lock(impl_->mu);
  return impl_->tools->names();
}

}  // namespace arbor

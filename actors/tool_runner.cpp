#include "actors/tool_runner.hpp"

#include <chrono>
#include <exception>
#include <thread>

#include "actors/messages.hpp"
#include "model/unicode.hpp"

namespace arbor::actors {
namespace {

// The handler's answer as the model will see it: ok, or an error message.
ToolDone call(const workflows::ToolHandler& handler, const model::Json& arguments,
              const workflows::ToolContext& context) {
  ToolDone done;
  try {
    auto out = handler(arguments, context);
    done.ok = out.has_value();
    done.output = out ? std::move(*out) : std::move(out.error());
  } catch (const std::exception& e) {
    done.output = std::string("the tool threw an exception: ") + e.what();
  } catch (...) {
    done.output = "the tool threw an exception";
  }
  if (!model::unicode::is_valid_utf8(done.output)) {
    const bool was_ok = done.ok;
    done.ok = false;
    done.output = std::string(was_ok ? "the tool returned" : "the tool failed with") +
                  " text that is not valid UTF-8 (" + std::to_string(done.output.size()) + " bytes); nothing of it is shown";
  }
  return done;
}

}  // namespace

void ToolRunner::run(const workflows::Tool& tool, model::Json arguments, workflows::ToolContext context,
                     ToolDoneListener agent, std::uint64_t call_id) {
  {
    std::lock_guard lock(shared_->mu);
    if (!shared_->alive) return;
    shared_->waiting[call_id] = std::move(agent);
  }
  // The thread holds the handler and the shared state, never an actor handle: after
  // shutdown() nothing it does touches the actor system.
  std::thread([shared = shared_, handler = tool.handler, arguments = std::move(arguments),
               context = std::move(context), call_id] {
    const auto start = std::chrono::steady_clock::now();
    ToolDone done = call(handler, arguments, context);
    done.call_id = call_id;
    done.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::lock_guard lock(shared->mu);
    auto it = shared->waiting.find(call_id);
    if (!shared->alive || it == shared->waiting.end()) return;
    caf::anon_send(it->second, std::move(done));
    shared->waiting.erase(it);
  }).detach();
}

void ToolRunner::forget(std::uint64_t call_id) {
  std::lock_guard lock(shared_->mu);
  shared_->waiting.erase(call_id);
}

void ToolRunner::shutdown() {
  std::lock_guard lock(shared_->mu);
  shared_->alive = false;
  shared_->waiting.clear();
}

}  // namespace arbor::actors

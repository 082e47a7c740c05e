// ToolRunner: runs tool handlers off the actors' threads. Each call gets its own
// detached std::thread (a handler may block or hang; CAF's workers must not), and its
// result comes back to the calling agent as a ToolDone message.
//
// A C++ thread cannot be killed: a handler that hangs keeps its thread (and whatever it
// holds) until it returns. The agent does not wait for it: past the tool's timeout it
// gives the model an error result, forgets the call, and a late ToolDone is dropped.
// shutdown() (called by the Runtime before its actor system goes) makes every later
// result a no-op; a handler still running then keeps running, detached, so it must not
// use objects that die with the Runtime.
// Thread-safe.
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "actors/interfaces.hpp"
#include "workflows/tools.hpp"

namespace arbor::actors {

class ToolRunner {
 public:
  ToolRunner() : shared_(std::make_shared<Shared>()) {}

  // Runs tool.handler(arguments, context) on a new thread and sends
  // ToolDone{call_id, ...} to `agent` when it returns (unless forgotten or shut down).
  // A handler that throws, or returns text that is not valid UTF-8, gives ok = false.
  void run(const workflows::Tool& tool, model::Json arguments, workflows::ToolContext context, ToolDoneListener agent,
           std::uint64_t call_id);
  // The caller no longer wants this call's result (it timed out or the agent ended).
  void forget(std::uint64_t call_id);
  void shutdown();

 private:
  struct Shared {
    std::mutex mu;
    bool alive = true;
    std::map<std::uint64_t, ToolDoneListener> waiting;  // call id -> agent; cleared by shutdown
  };
  std::shared_ptr<Shared> shared_;
};

}  // namespace arbor::actors

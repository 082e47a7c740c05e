// What every actor of one workflow run shares: the plan, the model's tokenizer and chat
// template, the cache actor, ids, and test-only fault injection. Immutable once the
// run starts, so sharing it between actors needs no locks.
#pragma once

#include <caf/all.hpp>

#include <map>
#include <memory>
#include <string>

#include "model/chat_template.hpp"
#include "model/model.hpp"
#include "actors/interfaces.hpp"
#include "actors/tool_runner.hpp"
#include "workflows/plan.hpp"
#include "workflows/tools.hpp"

namespace arbor::actors {

// Test hook (set through tests/runtime/fault_injection.hpp, never by a user): makes a
// named agent instance misbehave on its first K attempts, to exercise retries and
// timeouts without a broken model.
struct FaultInjection {
  std::map<std::string, int> fail_attempts;  // agent id -> first K attempts fail at once
  std::map<std::string, int> hang_attempts;  // agent id -> first K attempts never answer (time out)
  bool empty() const { return fail_attempts.empty() && hang_attempts.empty(); }
};

struct RunEnv {
  std::shared_ptr<const workflows::Plan> plan;
  std::shared_ptr<const model::Model> model;
  std::shared_ptr<const model::ChatTemplate> chat;
  CacheActor cache;
  std::string run_id;
  std::string tenant;
  bool stream_tokens = false;  // token events are wanted (someone listens)
  // A parent with a shared prefix and children but no turn of its own prefills (and
  // pins) that prefix before spawning them, so every child matches it from the cache.
  bool warm_prefixes = true;
  // Backpressure: at most this many of the run's requests are at the cache actor at once
  // (queued or live); the others wait in the run actor, in arrival order.
  std::size_t max_requests_at_cache = 256;
  FaultInjection faults;
  // Tools (issue 11 section 3): the runtime's registry when the run started (the plan's
  // tool names were checked against it), the runner of their handlers, and what the
  // built-ins may read (read_file: the run's folder, confined).
  std::shared_ptr<const workflows::ToolRegistry> tools;
  std::shared_ptr<ToolRunner> tool_runner;
  workflows::ToolContext tool_context;
  // How long an agent's history stays pinned while its tool runs (RuntimeConfig::
  // tool_pin_ttl_ms; 0 = not pinned).
  int tool_pin_ttl_ms = 0;
};

}  // namespace arbor::actors

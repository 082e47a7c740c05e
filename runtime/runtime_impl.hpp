// Internals of arbor::Runtime shared by runtime/*.cpp: the handles' states (each is the
// sink its actor reports into) and Runtime::Impl. Not a public header.
#pragma once

#include <caf/all.hpp>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "actors/config.hpp"
#include "actors/interfaces.hpp"
#include "actors/messages.hpp"
#include "actors/run_actor.hpp"
#include "actors/tool_runner.hpp"
#include "arbor/runtime.hpp"
#include "model/chat_template.hpp"
#include "model/model.hpp"
#include "runtime/kv_event_hub.hpp"
#include "workflows/plan.hpp"
#include "workflows/tools.hpp"

namespace arbor {

AgentResult to_agent_result(const actors::AgentReport& report);
// The tools a run's agents get: the registry's snapshot (checked against the plan:
// invalid_argument naming unknown tools) and read_file's folder (runtime/tools.cpp).
Result<void> attach_tools(Runtime::Impl& impl, actors::RunEnv& env, bool is_text, const std::string& workflow,
                          const DocumentAccess& documents);
GenerateResult to_generate_result(const actors::SeqResult& result);

// Written by the run actor (through RunSink), read by any thread.
struct RunHandle::State : actors::RunSink {
  std::shared_ptr<const workflows::Plan> plan;
  EventCallback callback;  // run actor's thread only; dropped when the run ends
  mutable std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  RunResult result;  // agents filled by build_agents()
  std::map<std::string, AgentResult> agents;
  // Instances of each dynamic fan-out template (for_each.output) seen so far (started or
  // reported), by template id: they are not in the plan, which holds the template only.
  std::map<std::string, std::set<std::size_t>> dynamic_instances;
  actors::RunActor run_actor;  // reset when the run ends (no handle outlives the actor system)
  std::chrono::steady_clock::time_point start;

  void on_event(const actors::RunEvent& event) override;
  void on_agent(const actors::AgentReport& report) override;
  void on_finished(RunStatus status, const std::string& error, double wall_ms,
                   const actors::CacheSnapshot& cache) override;
  RunResult current() const;  // under mu
  void note_instance(const std::string& agent_id);  // under mu
};

struct GenerationHandle::State {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  actors::SeqResult result;
  std::vector<ChatToolCall> tool_calls;  // with result: the call the model made
  actors::CacheActor cache;  // reset when done
  std::uint64_t request_id = 0;  // the request in flight (a tool call's second one replaces it)
  bool cancel_requested = false;  // set by cancel(): no further request is sent
  std::function<void(const std::string&)> on_token;
  GenerationDone on_done;  // called once by complete(), outside mu

  void complete(const actors::SeqResult& r, std::vector<ChatToolCall> calls = {});
  Result<GenerateResult> outcome() const;  // once finished (result no longer changes)
};

// A generation's tools (GenerateRequest::tools), for generation_actor.
struct GenerationTools {
  std::string call_schema;  // model::tool_call_schema of the tools it may call
  bool forced = false;      // required / function: the reply is the call
  bool none = false;        // tool_choice none: "<tool_call>" ends the reply, no call
};

// The actor behind start_generate (runtime/generation.cpp): `req` is the conversation's
// request; with `tools`, the call steps of actors/tool_call_steps.hpp follow it. It
// takes only the token pieces of its request (a TokenListener).
actors::TokenListener::behavior_type generation_actor(actors::TokenListener::pointer self, actors::CacheActor cache,
                                                      actors::SeqRequest req,
                                                      std::shared_ptr<GenerationHandle::State> state,
                                                      std::shared_ptr<const model::Model> model,
                                                      std::optional<GenerationTools> tools);

struct Runtime::Impl {
  RuntimeConfig config;
  std::shared_ptr<const model::Model> model;
  std::shared_ptr<const model::ChatTemplate> chat;
  std::string device, device_info;  // Runtime::device(), device_info()
  std::size_t kv_pool_bytes = 0;     // Runtime::kv_pool_bytes()
  std::unique_ptr<actors::ActorConfig> actor_config;  // outlives `system`
  std::unique_ptr<caf::actor_system> system;
  actors::CacheActor cache;
  std::mutex mu;
  std::vector<std::weak_ptr<RunHandle::State>> runs;
  std::vector<std::weak_ptr<GenerationHandle::State>> generations;
  std::uint64_t next_run = 1;
  actors::FaultInjection faults;  // copied into each run started later (tests only)
  // cache_stats() calls the cache actor did not answer (each logged at error level; the
  // call returned empty stats).
  std::atomic<std::uint64_t> cache_stats_failures{0};
  // Tools: the registry (replaced whole by add_tool, under mu; a run keeps the one it
  // started with) and the runner of their handlers (shut down before the actor system).
  std::shared_ptr<const workflows::ToolRegistry> tools =
      std::make_shared<const workflows::ToolRegistry>(workflows::ToolRegistry::builtins());
  std::shared_ptr<actors::ToolRunner> tool_runner = std::make_shared<actors::ToolRunner>();
  std::shared_ptr<KvEventHub> kv_events = std::make_shared<KvEventHub>();

  void shutdown();
};

}  // namespace arbor

// Run actor: one per workflow run. Spawns the root agents (monitored), which spawn the
// rest; answers their depends_on waits; turns their messages into events; gathers
// every AgentReport; supports cancel. When the run ends (every root reported, a root
// failed, or cancel) it stops what is left, sends CancelRun to the cache actor (so no
// request or pin of the run survives it), takes a cache snapshot, tells the sink, and
// quits. Messages: the RunActor interface (actors/interfaces.hpp).
//
// Backpressure: agents send their sequence requests to the run actor, never to the cache
// actor directly. At most env->max_requests_at_cache of them are at the cache actor at
// once; the rest wait here in arrival order and go as earlier ones finish. So a run of
// any size the validator allows never overflows the BatchEngine's queues, and it takes
// turns with other tenants there instead of crowding them out. A CancelRequest for a
// request still waiting here answers it "cancelled" at once; otherwise it is forwarded.
#pragma once

#include <caf/all.hpp>

#include <memory>
#include <string>

#include "actors/interfaces.hpp"
#include "actors/messages.hpp"
#include "actors/run_env.hpp"

namespace arbor::actors {

struct RunEvent {
  // The order of arbor::Event::Kind (the runtime converts one into the other).
  enum class Kind { run_started, agent_started, token, agent_finished, run_finished, tool_call, tool_result };
  Kind kind = Kind::run_started;
  std::string agent_id;
  std::string text;
  EventStatus status;                    // common/status.hpp: none, the agent's, the run's or the tool call's
  const CacheSnapshot* cache = nullptr;  // agent_finished, run_finished
  const ToolEvent* tool = nullptr;       // tool_call, tool_result
};

// Receives what the run actor observes; called on the run actor's thread, one call at a
// time, in event order.
class RunSink {
 public:
  virtual ~RunSink() = default;
  virtual void on_event(const RunEvent& event) = 0;
  virtual void on_agent(const AgentReport& report) = 0;
  // Last call: the run is over (status ok, failed or cancelled).
  virtual void on_finished(RunStatus status, const std::string& error, double wall_ms, const CacheSnapshot& cache) = 0;
};

// Spawns the run actor; send it (start_atom) to begin.
RunActor spawn_run_actor(caf::actor_system& system, std::shared_ptr<RunEnv> env,
                         std::shared_ptr<RunSink> sink);

}  // namespace arbor::actors

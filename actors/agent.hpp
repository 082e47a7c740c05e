// Agent actor: one per AgentPlan instance. A parent and a sub-agent are the same kind
// of actor; an agent with children spawns them (monitored), recursively.
//
// Contract (workflows/plan.hpp's execution contract):
//   1. waits for depends_on (asks the run actor);
//   2. turn 0 from its task: system message = the shared prefix text, user message =
//      the rendered task (Conversation keeps the prefix's ids identical for siblings);
//   3. spawns its children, pins its prefix in the cache while they are pending (an
//      agent without a task first prefills the prefix once, so every child hits it);
//      a dynamic fan-out child (for_each.output) is expanded here, from its source
//      agent's output, into instances this actor creates (and the instance actors own);
//      an empty list spawns none, and a list past max_children fails the agent;
//   4. fan_in, then each follow-up turn, as incremental turns of the same conversation;
//   5. reports an AgentReport to its parent and to the run, then quits.
// Supervision: a failed or timed-out attempt (timeout_ms covers the whole attempt,
// children included) is retried up to max_retries, then the agent fails with an error
// naming it and the reason. A child's failure fails the parent (no retry: the child
// already used its own). Every exit path cancels the agent's request in flight, stops
// its children and drops its pin, so no page stays locked. An exit message (run
// cancelled, parent failed) ends it with status "cancelled".
#pragma once

#include <caf/all.hpp>

#include <memory>

#include "actors/run_env.hpp"

namespace arbor::actors {

// `parent` is null for a root agent; `plan` points into env->plan. Messages: the
// AgentActor interface (actors/interfaces.hpp).
AgentActor spawn_agent(caf::local_actor* spawner, std::shared_ptr<const RunEnv> env,
                       const workflows::AgentPlan* plan, RunActor run, ReportListener parent);

}  // namespace arbor::actors

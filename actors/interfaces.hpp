// The actors' protocol as CAF 0.17 typed actor interfaces: each handle lists every
// message its actor takes and what it answers, so the compiler checks each send and
// request against it (a message an interface does not declare does not compile, nor
// does a reply handler of the wrong type). The messages are in actors/messages.hpp.
//
// Who sends what:
//   runtime, run actor, agents -> CacheActor (an agent's SeqRequest and CancelRequest go
//       through its run actor, which forwards them: backpressure, run_actor.hpp)
//   CacheActor -> a request's TokenListener (SeqRequest::listener): TokenEvent; the
//       listener is the run actor (for its agents) or a generation actor (runtime)
//   runtime -> RunActor: start_atom, cancel_atom
//   agent -> RunActor: AgentStarted, AgentReport, ToolEvent, DepsRequest,
//       SeqRequest, CancelRequest
//   agent -> parent agent (a ReportListener): AgentReport
//   ToolRunner's thread -> agent (a ToolDoneListener): ToolDone
//
// A handle converts without a cast to any interface whose messages it takes (a
// RunActor is a TokenListener and a ReportListener). An actor's own timers (messages
// it sends itself) are not part of its interface: its implementation extends the
// interface with them (cache_actor.cpp, agent.cpp), and only the narrower handle
// leaves the actor.
#pragma once

#include <caf/all.hpp>

#include <string>

#include "actors/messages.hpp"

namespace arbor::actors {

// One per model: the only owner of the BatchEngine (actors/cache_actor.hpp).
using CacheActor = caf::typed_actor<
    // Deferred: answered when the sequence finishes, fails or is cancelled.
    caf::replies_to<SeqRequest>::with<SeqResult>,
    caf::reacts_to<CancelRequest>,
    caf::reacts_to<CancelRun>,
    caf::replies_to<PinRequest>::with<PinReply>,
    caf::reacts_to<UnpinRequest>,
    caf::replies_to<PriorityRequest>::with<PinReply>,
    caf::replies_to<TreeRequest>::with<TreeReply>,
    caf::replies_to<caf::get_atom, stats_atom>::with<CacheSnapshot>,
    // The full invariant audit: "" = clean, else the first violation.
    caf::replies_to<caf::get_atom, audit_atom>::with<std::string>>;

// Whoever hears that an agent finished: its run actor and its parent agent.
using ReportListener = caf::typed_actor<caf::reacts_to<AgentReport>>;

// Whoever waits for a tool handler's answer (actors/tool_runner.hpp): the agent.
using ToolDoneListener = caf::typed_actor<caf::reacts_to<ToolDone>>;

// One per workflow run (actors/run_actor.hpp).
using RunActor = caf::typed_actor<
    caf::reacts_to<start_atom>,  // once, from the runtime
    caf::reacts_to<cancel_atom>,
    caf::reacts_to<AgentStarted>,
    caf::reacts_to<AgentReport>,
    caf::reacts_to<TokenEvent>,  // its agents' requests name it as their listener
    caf::reacts_to<ToolEvent>,
    // Answered once every listed agent has finished.
    caf::replies_to<DepsRequest>::with<DepsReply>,
    // An agent's request, forwarded to the cache actor (backpressure) and answered
    // with the cache actor's result.
    caf::replies_to<SeqRequest>::with<SeqResult>,
    caf::reacts_to<CancelRequest>>;

// One per agent instance (actors/agent.hpp): its sub-agents' reports and its tools'
// answers.
using AgentActor = caf::typed_actor<caf::reacts_to<AgentReport>, caf::reacts_to<ToolDone>>;

}  // namespace arbor::actors

// The actor an `arbor node` publishes over CAF's middleman: it serves generations and
// figures of one Runtime to routers (the protocol: runtime/cluster/wire.hpp; its typed
// interface: NodeActor, runtime/cluster/interfaces.hpp).
//
// Threads: the actor only routes; every call into the Runtime (start, cancel, stats)
// runs on a worker thread the actor owns, and generation runs on the Runtime's own
// actor system, whose callbacks send the pieces and the outcome straight to the
// requester. A
// requester that goes down (its process died or its connection dropped) has its
// generations on this node cancelled, so a dead router leaves no work behind.
// The Runtime must outlive the actor.
#pragma once

#include <caf/all.hpp>

#include "arbor/runtime.hpp"
#include "runtime/cluster/interfaces.hpp"
#include "runtime/cluster/wire.hpp"

namespace arbor::cluster {

// What the node serves (blocks on the runtime: call it from a plain thread, not an actor).
NodeInfo node_info(const Runtime& runtime);

// Spawns the node actor in `system` (an actor system with the middleman loaded when
// it is to be published). The worker thread is joined when the actor ends (work not
// yet started is dropped; the Runtime's destruction cancels what runs).
NodeActor spawn_node_actor(caf::actor_system& system, Runtime& runtime, const NodeInfo& info);

}  // namespace arbor::cluster

// The cache actor: one per model. The only owner of the BatchEngine, and through it of
// cache::PrefixCache (its PagePool, radix trees, pins) and model::Engine.
//
// Messages: the CacheActor interface (actors/interfaces.hpp). SeqRequest -> SeqResult is
// deferred (delivered when the sequence finishes, fails or is cancelled), with
// TokenEvent to the request's listener while it decodes.
// It drives itself with (step_atom) messages while work exists, one Engine::forward per
// step, so every other message interleaves between steps. It monitors each requester
// and cancels a requester's sequences and drops its pins when it dies (no leaked page
// locks, also for a request or pin that arrives after its run was closed).
// Spawned detached: a step blocks its own thread, never a CAF scheduler worker.
#pragma once

#include <caf/all.hpp>

#include "actors/batch_engine.hpp"
#include "actors/interfaces.hpp"
#include "common/result.hpp"

namespace arbor::actors {

// Builds the BatchEngine (model engine + cache) and spawns the actor; errors from the config.
Result<CacheActor> spawn_cache_actor(caf::actor_system& system, BatchEngineConfig config);

}  // namespace arbor::actors

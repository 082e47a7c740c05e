// The actor system configuration every Arbor actor system uses: registers each
// message type of actors/messages.hpp (so it survives serialization between nodes).
// It must outlive the actor_system built from it.
#pragma once

#include <caf/all.hpp>

namespace arbor::actors {

class ActorConfig : public caf::actor_system_config {
 public:
  ActorConfig();
};

}  // namespace arbor::actors

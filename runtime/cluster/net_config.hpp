// The actor system configuration of Arbor's network side (`arbor node`, the
// `arbor serve --nodes` router, probes): Arbor's message types plus CAF's middleman.
// Like every actor_system_config, it must outlive the actor_system built from it.
#pragma once

#include <caf/io/all.hpp>

#include "actors/config.hpp"

namespace arbor::cluster {

struct NetConfig : actors::ActorConfig {
  NetConfig() { load<caf::io::middleman>(); }
};

}  // namespace arbor::cluster

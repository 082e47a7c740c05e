// The actor system configuration of Arbor's network side (`arbor node`, the
// `arbor serve --nodes` router, probes): Arbor's message types, the cluster's handle
// type (runtime/cluster/interfaces.hpp), plus CAF's middleman.
// Like every actor_system_config, it must outlive the actor_system built from it.
#pragma once

#include <caf/io/all.hpp>

#include "actors/config.hpp"
#include "runtime/cluster/interfaces.hpp"

namespace arbor::cluster {

struct NetConfig : actors::ActorConfig {
  NetConfig() {
    load<caf::io::middleman>();
    // Crosses the network inside node_gen_atom and node_cancel_atom; unregistered, it
    // would arrive as an empty message (and its interface name would be unportable).
    add_message_type<ReplyListener>("arbor.cluster.ReplyListener");
    add_message_type<RunListener>("arbor.cluster.RunListener");  // inside node_run_atom, node_run_cancel_atom
    add_message_type<KvListener>("arbor.cluster.KvListener");  // inside node_kv_subscribe_atom
  }
};

}  // namespace arbor::cluster

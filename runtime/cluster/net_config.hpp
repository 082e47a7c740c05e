// The actor system configuration of Arbor's network side (`arbor node`, the
// `arbor serve --nodes` router, probes): Arbor's message types, the cluster's handle
// type (runtime/cluster/interfaces.hpp), CAF's middleman, and with ClusterTls CAF's
// OpenSSL module (mutual TLS, runtime/cluster/cluster_tls.hpp). publish_node and
// connect_to_node go through TLS exactly when the system was configured with it.
// Like every actor_system_config, it must outlive the actor_system built from it.
#pragma once

#include <cstdint>
#include <string>

#include <caf/io/all.hpp>

#include "actors/config.hpp"
#include "runtime/cluster/cluster_tls.hpp"
#include "runtime/cluster/interfaces.hpp"

namespace arbor::cluster {

struct NetConfig : actors::ActorConfig {
  // `tls` must have passed check_cluster_tls (CAF reads the files at the first handshake).
  explicit NetConfig(const ClusterTls& tls = {});
};

bool uses_tls(const caf::actor_system& system);

// Publishes the node actor at host:port (0 = any free port); the port bound.
caf::expected<std::uint16_t> publish_node(caf::actor_system& system, const NodeActor& node, const std::string& host,
                                          std::uint16_t port);
// The node actor published at host:port; CAF checks its interface against NodeActor.
caf::expected<NodeActor> connect_to_node(caf::actor_system& system, const std::string& host, std::uint16_t port);

}  // namespace arbor::cluster

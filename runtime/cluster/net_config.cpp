#include "runtime/cluster/net_config.hpp"

#include <caf/openssl/all.hpp>

namespace arbor::cluster {

NetConfig::NetConfig(const ClusterTls& tls) {
  load<caf::io::middleman>();
  // Crosses the network inside node_gen_atom and node_cancel_atom; unregistered, it
  // would arrive as an empty message (and its interface name would be unportable).
  add_message_type<ReplyListener>("arbor.cluster.ReplyListener");
  add_message_type<RunListener>("arbor.cluster.RunListener");  // inside node_run_atom, node_run_cancel_atom
  add_message_type<KvListener>("arbor.cluster.KvListener");    // inside node_kv_subscribe_atom
  if (!tls.enabled()) return;
  // With a CA set, CAF requires and verifies the peer's certificate on both sides.
  load<caf::openssl::manager>();
  openssl_certificate = tls.certificate;
  openssl_key = tls.key;
  openssl_cafile = tls.ca;
}

bool uses_tls(const caf::actor_system& system) { return !system.config().openssl_cafile.empty(); }

caf::expected<std::uint16_t> publish_node(caf::actor_system& system, const NodeActor& node, const std::string& host,
                                          std::uint16_t port) {
  if (uses_tls(system)) return caf::openssl::publish(node, port, host.c_str(), true);
  return system.middleman().publish(node, port, host.c_str(), true);
}

caf::expected<NodeActor> connect_to_node(caf::actor_system& system, const std::string& host, std::uint16_t port) {
  if (uses_tls(system)) return caf::openssl::remote_actor<NodeActor>(system, host, port);
  return system.middleman().remote_actor<NodeActor>(host, port);
}

}  // namespace arbor::cluster

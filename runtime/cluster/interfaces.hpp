// The cluster's protocol (runtime/cluster/wire.hpp) as CAF 0.17 typed actor interfaces,
// as actors/interfaces.hpp does for the actors inside one process: a send or request
// the interface does not declare does not compile.
//
// Who sends what:
//   router -> NodeActor (what `arbor node` publishes): node_info_atom, node_stats_atom,
//       node_tree_atom, node_gen_atom, node_cancel_atom, node_run_atom, node_run_cancel_atom
//   NodeActor -> the requester's ReplyListener (the router's inbox, named in each
//       node_gen_atom / node_cancel_atom): node_piece_atom, node_done_atom
//   NodeActor -> the requester's RunListener (the router's run inbox, named in each
//       node_run_atom / node_run_cancel_atom): node_run_event_atom, node_run_done_atom
//   router -> NodeActor: node_kv_subscribe_atom (a KvListener and a tag); then
//   NodeActor -> that KvListener: node_kv_atom per KV event of the node's runtime
//
// On the network: `caf::io::remote_actor<NodeActor>` compares the interface the node
// published with this one and fails with sec::unexpected_actor_messaging_interface
// when they differ (an `arbor node` of another build, or any other CAF actor); CAF
// 0.17 also refuses an untyped remote_actor (caf::actor) to a typed published actor.
// A ReplyListener travels inside node_gen_atom and node_cancel_atom, so NetConfig
// registers it by name (runtime/cluster/net_config.hpp).
#pragma once

#include <cstdint>
#include <string>

#include <caf/all.hpp>

#include "runtime/cluster/wire.hpp"

namespace arbor::cluster {

using node_kv_subscribe_atom = caf::atom_constant<caf::atom("nkvsub")>;
using node_kv_atom = caf::atom_constant<caf::atom("nkv")>;

// Whoever follows a node's KV events (the router's inbox): (tag, the event as
// kv_event_json text, arbor/runtime.hpp), in the order the node's cache made them;
// `tag` is the one given at subscription (the router's index of the node).
using KvListener = caf::typed_actor<caf::reacts_to<node_kv_atom, std::uint64_t, std::string>>;

// The router's inbox as a node sees it: a streamed generation's pieces, then exactly
// one outcome per generation (GenerateResult or Error JSON, wire.hpp).
using ReplyListener = caf::typed_actor<caf::reacts_to<node_piece_atom, std::uint64_t, std::string>,
                                       caf::reacts_to<node_done_atom, std::uint64_t, std::string>>;

// The router's run inbox as a node sees it: a run's events (Event wire JSON, all but
// run_finished), then exactly one outcome per run (RunOutcome or Error JSON, wire.hpp).
using RunListener = caf::typed_actor<caf::reacts_to<node_run_event_atom, std::uint64_t, std::string>,
                                     caf::reacts_to<node_run_done_atom, std::uint64_t, std::string>>;

// What `arbor node` publishes (runtime/cluster/node_actor.hpp).
using NodeActor = caf::typed_actor<
    caf::replies_to<node_info_atom>::with<std::string>,   // NodeInfo JSON
    caf::replies_to<node_stats_atom>::with<std::string>,  // NodeStats JSON
    caf::replies_to<node_tree_atom, std::string, std::uint64_t>::with<std::string>,  // (tenant, max_nodes): tree_to_wire
    // (id, GenerateRequest JSON, requester, whether to stream pieces): answered by
    // messages to the requester, never by a reply.
    caf::reacts_to<node_gen_atom, std::uint64_t, std::string, ReplyListener, bool>,
    // That generation of that requester ends with "cancelled".
    caf::reacts_to<node_cancel_atom, std::uint64_t, ReplyListener>,
    // (id, RunRequest JSON, requester): a workflow run, answered by messages to the
    // requester, never by a reply.
    caf::reacts_to<node_run_atom, std::uint64_t, std::string, RunListener>,
    // That run of that requester ends "cancelled".
    caf::reacts_to<node_run_cancel_atom, std::uint64_t, RunListener>,
    // From now on, every KV event of the node's runtime goes to the listener, until it
    // goes down (monitored). Subscribing again changes the tag.
    caf::reacts_to<node_kv_subscribe_atom, KvListener, std::uint64_t>>;

}  // namespace arbor::cluster

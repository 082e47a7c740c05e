// What crosses the network between an `arbor serve --nodes` router and its `arbor node`s
// (CAF's middleman, caf::io). Every message is atoms, integers, actor handles and
// strings, which CAF serializes without registration (but for the typed handle
// ReplyListener, which NetConfig registers); a request, a result and the
// node's figures travel as JSON text (the functions below), so a field added here
// needs no CAF type id and an old peer ignores a field it does not know.
//
// The node actor's interface (typed: NodeActor and ReplyListener in
// runtime/cluster/interfaces.hpp; the actor: runtime/cluster/node_actor.hpp):
//   (node_info_atom)                         -> string  NodeInfo JSON
//   (node_stats_atom)                        -> string  NodeStats JSON
//   (node_tree_atom, string tenant, u64 max_nodes) -> string  the tenant's cache tree
//        (tree_to_wire; empty when the tenant has no cache on the node)
//   (node_gen_atom, u64 id, string request, ReplyListener reply_to, bool pieces)
//        the node then sends reply_to (node_piece_atom, id, string piece) per token when
//        `pieces` (a streamed request), and exactly one (node_done_atom, id, string
//        outcome) (GenerateResult or Error JSON)
//   (node_cancel_atom, u64 id, ReplyListener reply_to) that generation ends with "cancelled"
//   (node_run_atom, u64 id, string RunRequest, RunListener reply_to)
//        runs a workflow; the node then sends reply_to (node_run_event_atom, id, string
//        event) per event but run_finished (event_to_wire), and exactly one
//        (node_run_done_atom, id, string RunOutcome) (run_outcome_to_wire: the RunResult
//        with its run_finished event, or an Error)
//   (node_run_cancel_atom, u64 id, RunListener reply_to) that run ends "cancelled"
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include <caf/all.hpp>

#include "arbor/runtime.hpp"
#include "common/result.hpp"

namespace arbor::cluster {

using node_info_atom = caf::atom_constant<caf::atom("ninfo")>;
using node_stats_atom = caf::atom_constant<caf::atom("nstats")>;
using node_tree_atom = caf::atom_constant<caf::atom("ntree")>;
using node_gen_atom = caf::atom_constant<caf::atom("ngen")>;
using node_piece_atom = caf::atom_constant<caf::atom("npiece")>;
using node_done_atom = caf::atom_constant<caf::atom("ndone")>;
using node_cancel_atom = caf::atom_constant<caf::atom("ncancel")>;
using node_run_atom = caf::atom_constant<caf::atom("nrun")>;
using node_run_cancel_atom = caf::atom_constant<caf::atom("nrcancel")>;
using node_run_event_atom = caf::atom_constant<caf::atom("nrevent")>;
using node_run_done_atom = caf::atom_constant<caf::atom("nrdone")>;

// What a node serves: the router checks every node has the model it tokenizes with.
struct NodeInfo {
  std::string model;
  std::size_t context_length = 0;
  std::size_t page_size = 0;   // tokens per KV page
  std::size_t pages_total = 0;  // the node's KV pool
};

// A node's load and cache at one instant.
struct NodeStats {
  CacheStats cache;
  std::size_t inflight = 0;  // generations started on the node and not done
  std::size_t runs = 0;      // workflow runs started on the node and not done
};

// A workflow run sent to a node: what Runtime::start needs. The router validated the
// workflow and read its prefix files under its own DocumentAccess; `documents` carries
// their bytes (path as written -> bytes), which the node reads through
// DocumentAccess::given_files, so nodes need no shared file system.
struct RunRequest {
  std::string workflow;  // the workflow document, JSON text
  std::map<std::string, std::string> inputs;
  std::string tenant;
  std::map<std::string, std::string> documents;
};

// A run's end on a node: its result and its run_finished event (the router publishes
// the event once the result is in place).
struct RunOutcome {
  RunResult result;
  Event finished;
};

std::string to_wire(const GenerateRequest& request);
Result<GenerateRequest> request_from_wire(const std::string& text);
// A generation's outcome: {"result": GenerateResult} or {"error": {"code", "message"}}.
std::string to_wire(const Result<GenerateResult>& outcome);
Result<GenerateResult> outcome_from_wire(const std::string& text);
std::string to_wire(const NodeInfo& info);
Result<NodeInfo> info_from_wire(const std::string& text);
std::string to_wire(const NodeStats& stats);
Result<NodeStats> stats_from_wire(const std::string& text);
// A cache tree (Runtime::cache_tree) as {"nodes": [...]}, every field (common/cache_stats.hpp's
// JSON names); the router sets `node` on what it receives.
std::string tree_to_wire(const std::vector<CacheTreeNode>& nodes);
Result<std::vector<CacheTreeNode>> tree_from_wire(const std::string& text);
std::string to_wire(const RunRequest& request);
Result<RunRequest> run_request_from_wire(const std::string& text);
// Every field of the event (its cache snapshot included).
std::string event_to_wire(const Event& event);
Result<Event> event_from_wire(const std::string& text);
// {"result": RunResult (every field), "event": run_finished event} or {"error": {...}}.
std::string to_wire(const Result<RunOutcome>& outcome);
Result<RunOutcome> run_outcome_from_wire(const std::string& text);

}  // namespace arbor::cluster

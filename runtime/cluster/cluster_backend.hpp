// `arbor serve --nodes HOST:PORT,...`: the HTTP server's Backend over `arbor node`
// processes, reached through CAF's middleman (caf::io::remote_actor; inside mutual TLS
// with ClusterOptions::tls, runtime/cluster/cluster_tls.hpp). The server's
// routes, auth, admission, streaming and metrics are the single-process ones; each
// generation runs on the node runtime/cluster/route_policy.hpp chooses.
//
// Routing: the router tokenizes each prompt with the model's tokenizer and chat
// template (runtime/chat_prompt.hpp: the ids the node's cache will see), matches them
// against each node's PrefixIndex and applies choose_node. The index is fed by the
// prompts the router sends there (at once: the next request may come before the
// node's events) and by the node's KV events (node_kv_subscribe_atom, sent when the
// node is watched, again on rejoin): pages it stored and evicted, so an evicted prefix
// stops attracting requests.
//
// Failure: each node actor is monitored. A node that goes down (killed, or its
// connection dropped) is marked down, its index is cleared and it gets no further
// requests. Each of its generations that has streamed nothing to the client yet is
// sent again to another node (at most `max_attempts` in all; with greedy decoding the
// client cannot tell); one that has streamed, or has no node left, ends with
// ErrorCode::cancelled (HTTP 503) naming the node. Down nodes are tried again every
// rejoin_period (a thread of the router): one that answers at its address with the same
// model rejoins, with an empty index.
//
// Workflow runs (POST /v1/runs): validated on the router (the same 400 with every
// diagnostic as a single `arbor serve`); the prefix files the server's DocumentAccess
// allows are read here and their bytes sent with the run (DocumentAccess::given_files on
// the node: nodes need no shared file system; the read_file tool reads nothing there).
// A run is one routing decision: all its agents run on one node, chosen by
// choose_node on its shared prefixes tokenized as its agents tokenize them (BOS + the
// system segment, actors::Conversation), summed over the workflow's prefixes; they
// enter that node's index. Its events stream back as they happen; the router keeps its
// state (GET /v1/runs/{id} answers after its node died). A run whose node goes down is
// run again, whole, on another node while its attempts allow: 1 + the smallest
// max_retries of its agents (a whole-run retry repeats every agent, so it is retried
// only as often as each of them may be; a retry's run_started event is not repeated,
// its agents start again); else it fails (status failed; a run_finished event whose
// text names the node). Cancel reaches the node.
// Thread safety: as server::Backend; callbacks run on the router's actor thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.hpp"
#include "runtime/cluster/cluster_tls.hpp"
#include "runtime/cluster/route_policy.hpp"
#include "runtime/cluster/wire.hpp"
#include "runtime/server/backend.hpp"

namespace arbor::cluster {

struct Endpoint {
  std::string host;
  std::uint16_t port = 0;
  std::string text() const { return host + ":" + std::to_string(port); }
};

// "HOST:PORT" (port 1..65535; for `arbor node --listen` 0 too when `allow_any_port`).
Result<Endpoint> parse_endpoint(const std::string& text, bool allow_any_port = false);
// "HOST:PORT,HOST:PORT,...": at least one, no duplicates.
Result<std::vector<Endpoint>> parse_endpoints(const std::string& list);

// How the router picks a node: choose_node's rule, or each up node in turn (the
// baseline `arbor bench cluster` compares against).
enum class Routing { cache_aware, round_robin };

struct ClusterOptions {
  std::vector<Endpoint> nodes;
  Routing routing = Routing::cache_aware;
  std::string model_path;            // the tokenizer and chat template routing uses: the nodes' model
  std::size_t overload_margin = 4;   // choose_node's rule 3
  int max_attempts = 2;              // nodes one generation may be sent to
  std::chrono::milliseconds rejoin_period{1000};  // how often down nodes are tried again
  ClusterTls tls;  // mutual TLS with the nodes (cluster_tls.hpp); none = plain TCP
};

// What the router knows of one node (tests, metrics).
struct NodeView {
  std::string endpoint;
  bool up = true;
  std::size_t inflight = 0;
  std::size_t indexed_pages = 0;
  RouteCounts routed{};  // requests sent here
  std::uint64_t matched_tokens = 0;  // the index's matched tokens summed over requests sent here
  std::uint64_t retried_here = 0;    // requests re-sent here after their node went down
  std::uint64_t rejoins = 0;         // times it came back after being down
  // Workflow runs: in flight, sent here by RouteKind, sent here again after their node went down.
  std::size_t runs = 0;
  RouteCounts runs_routed{};
  std::uint64_t runs_retried_here = 0;
  std::uint64_t kv_events = 0;       // the node's KV events applied to its index
};

class ClusterBackend : public server::Backend {
 public:
  // Loads the tokenizer, connects to every node and checks each serves the model.
  // Errors: not_found / corrupt_data (the model file), unsupported (a node cannot be
  // reached: what to start, or the TLS it needs), invalid_argument (a node serves
  // another model; options.tls fails check_cluster_tls).
  static Result<std::unique_ptr<ClusterBackend>> connect(ClusterOptions options);
  ~ClusterBackend() override;  // fails what is still in flight (cancelled), then closes

  std::string model_name() const override;
  std::size_t context_length() const override;
  Result<std::shared_ptr<server::Generation>> start_generate(
      const GenerateRequest& request, std::function<void(const std::string&)> on_token,
      std::function<void(const Result<GenerateResult>&)> on_done) override;
  Result<std::shared_ptr<server::RunControl>> start_run(const std::string& workflow_json,
                                                        const std::map<std::string, std::string>& inputs,
                                                        EventCallback on_event, const std::string& tenant,
                                                        const DocumentAccess& documents) override;
  std::string run_json(const RunResult& result) const override;
  // The up nodes' statistics summed (hit_ratio recomputed); a node that does not answer
  // within 2 s counts as nothing.
  CacheStats cache_stats() const override;
  // Every up node's tree of the tenant (2 s each at most), each entry naming its node
  // (CacheTreeNode::node), ids renumbered across nodes; max_nodes shared among them.
  std::vector<CacheTreeNode> cache_tree(const std::string& tenant, std::size_t max_nodes) const override;
  // Per node (label node="HOST:PORT"): arbor_cluster_node_up, _inflight, _indexed_pages,
  // arbor_cluster_routed_total{route="prefix|balance|cold"}, _matched_tokens_total,
  // _retried_total, _rejoins_total, _kv_events_total; and from each up node (2 s at most):
  // arbor_cluster_node_pages_free, _pages_total, _queued_requests, _hit_ratio; workflow
  // runs: arbor_cluster_node_runs, arbor_cluster_runs_routed_total{route}, _runs_retried_total.
  std::string metrics_text() const override;
  // Per node: "node", "up", "inflight", "indexed_pages", "routed" {prefix, balance,
  // cold}, "matched_tokens", "retried", "rejoins", workflow "runs" in flight,
  // "runs_routed" {prefix, balance, cold}, "runs_retried" (the router's view), and the node's
  // own "pages_total", "pages_free", "queued_requests", "hit_ratio" (null while down or
  // silent for 2 s).
  std::string nodes_json() const override;
  // Every node's KV events as the router receives them (KvEvent::node names the node;
  // the router's own sequence, no gaps), and a cleared event naming a node when the
  // router loses it. Delivered on the router's inbox actor, in order per node.
  Result<KvEventSubscription> subscribe_kv_events(std::function<void(const KvEvent&)> callback) override;

  std::vector<NodeView> nodes() const;

  struct State;

 private:
  explicit ClusterBackend(std::shared_ptr<State> state);
  std::vector<std::optional<NodeStats>> ask_node_stats() const;
  std::shared_ptr<State> state_;
};

// One node's figures, asked directly (tests, tools): connects (over TLS with `tls`),
// asks, disconnects.
Result<NodeStats> query_node_stats(const Endpoint& node, const ClusterTls& tls = {});

}  // namespace arbor::cluster

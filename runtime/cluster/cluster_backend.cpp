#include "runtime/cluster/cluster_backend.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "actors/conversation.hpp"
#include "common/json_text.hpp"
#include "model/chat_template.hpp"
#include "model/gguf.hpp"
#include "model/tokenizer.hpp"
#include "runtime/chat_prompt.hpp"
#include "runtime/cluster/net_config.hpp"
#include "runtime/cluster/route_policy.hpp"
#include "runtime/kv_event_hub.hpp"
#include "workflows/documents.hpp"
#include "workflows/parser.hpp"
#include "workflows/tools.hpp"
#include "workflows/workflow.hpp"

namespace arbor::cluster {
namespace {

using watch_atom = caf::atom_constant<caf::atom("nwatch")>;

// The router's inbox: what the nodes send back (ReplyListener, the only handle a node
// gets) plus the router's own request to watch a node.
using InboxActor = ReplyListener::extend<caf::reacts_to<watch_atom, NodeActor, std::size_t>,
                                        caf::reacts_to<node_kv_atom, std::uint64_t, std::string>>;

// CAF checks the node's published interface against NodeActor on connect.
Result<NodeActor> connect_node(caf::actor_system& system, const Endpoint& node) {
  auto actor = connect_to_node(system, node.host, node.port);
  if (actor) return *actor;
  if (actor.error() == caf::sec::unexpected_actor_messaging_interface)
    return fail(ErrorCode::unsupported, "the process at " + node.text() +
                                            " is not an `arbor node` of this arbor build (its actor interface differs "
                                            "from this router's); run this build's `arbor node --listen " +
                                            node.text() + "` there");
  // A TLS node drops a plain router during the handshake. A TLS router is dropped there
  // by a node that refused its certificate, and by a plain node (which reads the TLS
  // hello as garbage; or it fails to connect at all, timing decides).
  std::string hint = "; start it with `arbor node --listen " + node.text() + "`";
  if (actor.error() == caf::sec::disconnect_during_handshake)
    hint = uses_tls(system) ? "; the node refused this router's certificate, or runs without TLS: both need "
                              "--cluster-cert/--cluster-key with certificates from the same --cluster-ca"
                            : "; the node requires TLS: give the router --cluster-cert, --cluster-key and --cluster-ca";
  else if (uses_tls(system))
    hint += " and the same --cluster-ca as this router (a node without TLS cannot be reached over it)";
  return fail(ErrorCode::unsupported, "cannot reach node " + node.text() + " (" + system.render(actor.error()) + ")" + hint);
}

// Asks `node` one question whose answer is a string; errors name the node.
template <class Atom, class... Args>
Result<std::string> ask(caf::actor_system& system, const NodeActor& node, const Endpoint& at, Atom atom,
                        std::chrono::seconds timeout, const Args&... args) {
  caf::scoped_actor self{system};
  Result<std::string> out = fail(ErrorCode::timeout, "node " + at.text() + " did not answer");
  self->request(node, timeout, atom, args...)
      .receive([&](std::string& text) { out = std::move(text); },
               [&](caf::error& e) {
                 out = fail(ErrorCode::unsupported, "node " + at.text() + ": " + system.render(e));
               });
  return out;
}

std::string file_model_name(const model::GgufFile& file, const std::string& path) {
  auto name = file.get_string("general.name");
  if (name && !name->empty()) return *name;
  return std::filesystem::path(path).stem().string();
}

// A node's index holds what its cache holds (its KV events remove what it evicts) plus
// the prompts sent there whose events have not come yet; the bound, twice the node's
// pool, only drops keys sent but never stored (a failed request). At the pool itself it
// would drop keys the node still holds whenever a new prompt arrives before the
// evictions it causes.
std::size_t index_capacity(const NodeInfo& info) { return 2 * info.pages_total; }

void add(TokenCounters& to, const TokenCounters& from) {
  to.lookups += from.lookups;
  to.hit_tokens += from.hit_tokens;
  to.miss_tokens += from.miss_tokens;
  to.inserted_tokens += from.inserted_tokens;
  to.evicted_pages += from.evicted_pages;
}

}  // namespace

Result<Endpoint> parse_endpoint(const std::string& text, bool allow_any_port) {
  const auto colon = text.rfind(':');
  const std::string how = "; write HOST:PORT, e.g. 127.0.0.1:7001";
  if (colon == std::string::npos || colon == 0)
    return fail(ErrorCode::invalid_argument, "node address '" + text + "' has no HOST:PORT form" + how);
  Endpoint e;
  e.host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc{} || end != port.data() + port.size() || value > 65535 || (value == 0 && !allow_any_port))
    return fail(ErrorCode::invalid_argument, "node address '" + text + "': port '" + port + "' must be in " +
                                                 (allow_any_port ? "0" : "1") + "..65535" + how);
  e.port = static_cast<std::uint16_t>(value);
  return e;
}

Result<std::vector<Endpoint>> parse_endpoints(const std::string& list) {
  std::vector<Endpoint> out;
  std::set<std::string> seen;
  std::size_t at = 0;
  while (at <= list.size()) {
    const auto comma = std::min(list.find(',', at), list.size());
    auto e = parse_endpoint(list.substr(at, comma - at));
    if (!e) return std::unexpected(e.error());
    if (!seen.insert(e->text()).second)
      return fail(ErrorCode::invalid_argument, "node " + e->text() + " is listed twice in --nodes; list each once");
    out.push_back(std::move(*e));
    at = comma + 1;
  }
  return out;
}

struct ClusterBackend::State {
  struct Node {
    Endpoint endpoint;
    NodeActor actor;
    PrefixIndex index;
    bool up = true;
    std::size_t inflight = 0;
    RouteCounts routed{};
    std::uint64_t matched_tokens = 0, retried_here = 0, rejoins = 0;
    std::uint64_t kv_events = 0;  // KV events applied to `index`
    // Workflow runs: in flight here, sent here by RouteKind, sent here again after
    // their node went down.
    std::size_t runs = 0;
    RouteCounts runs_routed{};
    std::uint64_t runs_retried_here = 0;
  };
  // A workflow run the router has started: all its agents run on one node.
  struct Run {
    std::string id;                                   // "run-N", the router's (a node numbers its runs its own way)
    std::string tenant;                               // routing's ("default" for none)
    std::string wire;                                 // the RunRequest as sent
    std::vector<std::vector<std::int32_t>> prefixes;  // each shared prefix's ids, as its agents tokenize it
    int max_attempts = 1;                             // nodes it may be sent to: 1 + the run's retries
    std::chrono::steady_clock::time_point start;
    std::mutex events_mu;    // one event delivered at a time, run_finished last
    EventCallback on_event;  // under events_mu; dropped once finished
    // Under State::mu:
    std::uint64_t attempt = 0;  // the id its current node knows; 0 = on no node
    std::size_t node = 0;
    int attempts = 0;
    bool cancelled = false;
    std::vector<std::string> lost;  // the nodes that went down under it
    // Under its own mutex:
    mutable std::mutex mu;
    std::condition_variable cv;
    RunResult result;  // status running until done
    bool done = false;
  };
  struct Pending {
    std::size_t node = 0;
    std::string tenant;
    std::string wire;  // the request as sent
    std::vector<std::int32_t> prompt;
    std::function<void(const std::string&)> on_token;
    std::function<void(const Result<GenerateResult>&)> on_done;
    bool streamed = false;
    int attempts = 0;
  };
  using Failure = std::pair<std::function<void(const Result<GenerateResult>&)>, Error>;

  ClusterOptions options;
  std::unique_ptr<model::GgufFile> file;
  std::unique_ptr<model::Tokenizer> tokenizer;
  std::unique_ptr<model::ChatTemplate> chat;
  NodeInfo info;
  std::unique_ptr<NetConfig> config;  // outlives the system
  std::unique_ptr<caf::actor_system> system;
  InboxActor inbox;  // receives the nodes' pieces, outcomes and down messages

  mutable std::mutex mu;
  std::condition_variable wake;  // the rejoiner's sleep; stopping ends it
  bool stopping = false;
  std::thread rejoiner;
  std::vector<Node> nodes;
  std::map<std::uint64_t, Pending> pending;
  std::uint64_t next_id = 1;
  RunListener run_inbox;                               // receives the nodes' run events and outcomes
  std::map<std::uint64_t, std::shared_ptr<Run>> runs;  // in flight, by the id their node knows
  std::uint64_t next_run = 1;
  // The nodes' KV events, each naming its node, for GET /v1/kv_events on the router;
  // published by the inbox actor only, never under `mu`.
  std::shared_ptr<KvEventHub> kv_events = std::make_shared<KvEventHub>();
  std::size_t turn = 0;  // Routing::round_robin

  ~State() {
    {
      std::lock_guard lock(mu);
      stopping = true;
    }
    wake.notify_all();
    if (rejoiner.joinable()) rejoiner.join();
    std::vector<Failure> failures;
    {
      std::lock_guard lock(mu);
      for (auto& [id, p] : pending) {
        if (nodes[p.node].up) caf::anon_send(nodes[p.node].actor, node_cancel_atom::value, id, ReplyListener{inbox});
        failures.push_back({std::move(p.on_done), Error{ErrorCode::cancelled, "the router is shutting down"}});
      }
      pending.clear();
    }
    for (auto& [done, error] : failures)
      if (done) done(std::unexpected(error));
    std::vector<std::shared_ptr<Run>> stopped;
    {
      std::lock_guard lock(mu);
      for (auto& [attempt, run] : runs) {
        if (nodes[run->node].up)
          caf::anon_send(nodes[run->node].actor, node_run_cancel_atom::value, attempt, run_inbox);
        stopped.push_back(run);
      }
      runs.clear();
    }
    for (auto& run : stopped) fail_run(run, RunStatus::cancelled, "the router is shutting down");
    if (run_inbox) caf::anon_send_exit(run_inbox, caf::exit_reason::user_shutdown);
    run_inbox = nullptr;
    if (inbox) caf::anon_send_exit(inbox, caf::exit_reason::user_shutdown);
    inbox = nullptr;
    for (auto& n : nodes) n.actor = nullptr;
    system.reset();  // waits for the inbox to quit
  }

  // Each node's handle (null while down) and address, in nodes() order.
  std::vector<std::pair<NodeActor, Endpoint>> handles() const {
    std::vector<std::pair<NodeActor, Endpoint>> out;
    std::lock_guard lock(mu);
    for (const auto& n : nodes) out.emplace_back(n.up ? n.actor : NodeActor{}, n.endpoint);
    return out;
  }

  // Every `period`, tries to reconnect each down node; one that answers with the same
  // model is up again, with an empty index (its cache started over).
  void rejoin_loop(std::chrono::milliseconds period) {
    std::unique_lock lock(mu);
    while (!stopping) {
      wake.wait_for(lock, period, [this] { return stopping; });
      if (stopping) return;
      std::vector<std::pair<std::size_t, Endpoint>> down;
      for (std::size_t i = 0; i < nodes.size(); ++i)
        if (!nodes[i].up) down.emplace_back(i, nodes[i].endpoint);
      lock.unlock();
      for (const auto& [index, at] : down) {
        auto actor = connect_to_node(*system, at.host, at.port);
        if (!actor) continue;
        auto text = ask(*system, *actor, at, node_info_atom::value, std::chrono::seconds(10));
        auto info = text ? info_from_wire(*text) : Result<NodeInfo>(std::unexpected(text.error()));
        if (!info || info->model != this->info.model) continue;
        std::lock_guard relock(mu);
        auto& n = nodes[index];
        n.actor = *actor;
        n.index = PrefixIndex(info->page_size, index_capacity(*info));
        n.up = true;
        ++n.rejoins;
        caf::anon_send(inbox, watch_atom::value, n.actor, index);
      }
      lock.lock();
    }
  }

  // Routing::round_robin: the next up node after the last one chosen.
  std::optional<RouteChoice> next_in_turn(const std::vector<NodeLoad>& loads) {
    for (std::size_t step = 0; step < loads.size(); ++step) {
      const std::size_t i = (turn + step) % loads.size();
      if (!loads[i].up) continue;
      turn = i + 1;
      return RouteChoice{i, loads[i].matched_tokens ? RouteKind::prefix : RouteKind::cold, loads[i].matched_tokens};
    }
    return std::nullopt;
  }

  // Chooses a node for `p` and sends it there. Called with `mu` held.
  bool dispatch(std::uint64_t id, Pending& p) {
    std::vector<NodeLoad> loads;
    for (const auto& n : nodes)
      loads.push_back({n.up, n.inflight + n.runs, n.up ? n.index.match(p.tenant, p.prompt) : 0, n.index.num_pages()});
    auto choice = options.routing == Routing::cache_aware ? choose_node(loads, options.overload_margin)
                                                          : next_in_turn(loads);
    if (!choice) return false;
    auto& n = nodes[choice->node];
    ++n.inflight;
    ++n.routed[choice->kind];
    n.matched_tokens += choice->matched_tokens;
    if (p.attempts > 0) ++n.retried_here;
    n.index.insert(p.tenant, p.prompt);
    p.node = choice->node;
    ++p.attempts;
    caf::anon_send(n.actor, node_gen_atom::value, id, p.wire, ReplyListener{inbox}, bool(p.on_token));
    return true;
  }

  void on_piece(std::uint64_t id, const std::string& piece) {
    std::function<void(const std::string&)> on_token;
    {
      std::lock_guard lock(mu);
      auto it = pending.find(id);
      if (it == pending.end() || !it->second.on_token) return;
      it->second.streamed = it->second.streamed || !piece.empty();
      on_token = it->second.on_token;
    }
    on_token(piece);
  }

  void on_done(std::uint64_t id, const std::string& text) {
    std::function<void(const Result<GenerateResult>&)> done;
    {
      std::lock_guard lock(mu);
      auto it = pending.find(id);
      if (it == pending.end()) return;
      --nodes[it->second.node].inflight;
      done = std::move(it->second.on_done);
      pending.erase(it);
    }
    if (done) done(outcome_from_wire(text));
  }

  // A node's KV event (kv_event_json text): stored pages are listed (as just used),
  // removed ones dropped, a cleared event empties the index (whatever its tenant: the
  // index does not keep tenants apart, only their keys); then it is published, naming
  // the node. Ignored while the node is down, and when the text is not an event (an
  // index is a hint, and an event of a newer build may differ).
  void on_kv_event(std::uint64_t index, const std::string& text) {
    auto event = kv_event_from_json(nlohmann::json::parse(text, nullptr, false));
    {
      std::lock_guard lock(mu);
      if (index >= nodes.size() || !nodes[index].up || !event) return;
      auto& n = nodes[index];
      ++n.kv_events;
      switch (event->kind) {
        case KvEvent::Kind::stored: n.index.insert_keys(event->keys); break;
        case KvEvent::Kind::removed: n.index.remove_keys(event->keys); break;
        case KvEvent::Kind::cleared: n.index.clear(); break;
      }
      event->node = n.endpoint.text();
    }
    kv_events->publish(std::move(*event));
  }

  void on_node_down(std::size_t index, const std::string& reason) {
    std::vector<Failure> failures;
    std::vector<std::pair<std::shared_ptr<Run>, std::string>> runs_lost;
    std::string name;
    {
      std::lock_guard lock(mu);
      auto& node = nodes[index];
      if (!node.up) return;
      node.up = false;
      node.inflight = 0;
      node.index.clear();
      name = node.endpoint.text();
      const std::string what = "node " + node.endpoint.text() + " went down (" + reason + ") while serving this request";
      for (auto it = pending.begin(); it != pending.end();) {
        auto& p = it->second;
        if (p.node != index) {
          ++it;
          continue;
        }
        if (!p.streamed && p.attempts < options.max_attempts && dispatch(it->first, p)) {
          ++it;
          continue;
        }
        const std::string why = p.streamed ? "; part of the reply was streamed already, so it was not retried"
                                           : "; no other node could take it";
        failures.push_back({std::move(p.on_done), Error{ErrorCode::cancelled, what + why + "; send it again"}});
        it = pending.erase(it);
      }
      runs_lost = runs_on_node_down(index, reason);
    }
    // Its consumers forget the node's pages, as the index did (if it rejoins, only the
    // pages it stores from then on are announced).
    kv_events->publish(KvEvent{.kind = KvEvent::Kind::cleared, .node = name});
    for (auto& [done, error] : failures)
      if (done) done(std::unexpected(error));
    for (auto& [run, error] : runs_lost) fail_run(run, RunStatus::failed, error);
  }

  // Chooses a node for `run` (choose_node on its shared prefixes: the matched tokens
  // of all of them) and sends it there. Called with `mu` held.
  bool dispatch_run(const std::shared_ptr<Run>& run) {
    std::vector<NodeLoad> loads;
    for (const auto& n : nodes) {
      std::size_t matched = 0;
      if (n.up)
        for (const auto& ids : run->prefixes) matched += n.index.match(run->tenant, ids);
      loads.push_back({n.up, n.inflight + n.runs, matched, n.index.num_pages()});
    }
    auto choice =
        options.routing == Routing::cache_aware ? choose_node(loads, options.overload_margin) : next_in_turn(loads);
    if (!choice) return false;
    auto& n = nodes[choice->node];
    ++n.runs;
    ++n.runs_routed[choice->kind];
    if (run->attempts > 0) ++n.runs_retried_here;
    for (const auto& ids : run->prefixes) n.index.insert(run->tenant, ids);
    run->node = choice->node;
    run->attempt = next_id++;
    ++run->attempts;
    runs.emplace(run->attempt, run);
    caf::anon_send(n.actor, node_run_atom::value, run->attempt, run->wire, run_inbox);
    return true;
  }

  // The runs on a node that went down: each is sent to another node while its
  // attempts allow, else returned with the error that fails it. Called with `mu` held.
  std::vector<std::pair<std::shared_ptr<Run>, std::string>> runs_on_node_down(std::size_t index,
                                                                              const std::string& reason) {
    std::vector<std::pair<std::shared_ptr<Run>, std::string>> lost;
    auto& node = nodes[index];
    node.runs = 0;
    std::vector<std::shared_ptr<Run>> moved;
    for (auto it = runs.begin(); it != runs.end();) {
      if (it->second->node != index) {
        ++it;
        continue;
      }
      moved.push_back(it->second);
      it = runs.erase(it);
    }
    for (auto& run : moved) {
      run->attempt = 0;
      run->lost.push_back(node.endpoint.text());
      if (!run->cancelled && run->attempts < run->max_attempts && dispatch_run(run)) continue;
      std::string nodes_lost;
      for (const auto& at : run->lost) nodes_lost += (nodes_lost.empty() ? "" : ", ") + at;
      std::string error = "node " + node.endpoint.text() + " went down (" + reason + ") while running this run";
      if (run->cancelled) error += "; it had been cancelled";
      else if (run->attempts < run->max_attempts)
        error += "; no other node is up to run it again; restart the nodes, then post the run again";
      else if (run->max_attempts == 1)
        error +=
            "; it was not retried: the workflow allows no retry (max_retries 0); raise max_retries (the "
            "smallest of its agents' counts) to run it again on another node, or post it again";
      else
        error += "; it was not retried again: it ran on " + std::to_string(run->attempts) + " node(s) (" + nodes_lost +
                 "), all that its max_retries " + std::to_string(run->max_attempts - 1) + " allows; post it again";
      lost.emplace_back(run, std::move(error));
    }
    return lost;
  }

  // "attempt 2 of 3, on HOST:PORT: the run started again, every agent from the
  // beginning (HOST:PORT went down)": the nodes lost so far, in order.
  static std::string retry_marker(const Run& run, const std::string& node) {
    std::string lost;
    for (const auto& at : run.lost) lost += (lost.empty() ? "" : ", ") + at;
    return "attempt " + std::to_string(run.attempts) + " of " + std::to_string(run.max_attempts) + ", on " + node +
           ": the run started again, every agent from the beginning (" + lost + " went down)";
  }

  // A run's event from its node (all but run_finished).
  void on_run_event(std::uint64_t attempt, const std::string& text) {
    std::shared_ptr<Run> run;
    auto event = event_from_wire(text);
    if (!event) return;
    {
      std::lock_guard lock(mu);
      auto it = runs.find(attempt);
      if (it == runs.end()) return;  // from an attempt that is over
      run = it->second;
      // A retry's run_started is the client's marker that every agent starts again.
      if (event->kind == Event::Kind::run_started && run->attempts > 1)
        event->text = retry_marker(*run, nodes[run->node].endpoint.text());
    }
    event->run_id = run->id;
    {
      std::lock_guard record(run->mu);
      if (run->done) return;
      note_event(run->result, *event);
    }
    std::lock_guard delivery(run->events_mu);
    if (run->on_event) run->on_event(*event);
  }

  // A run's outcome from its node: its result, then its run_finished event.
  void on_run_done(std::uint64_t attempt, const std::string& text) {
    std::shared_ptr<Run> run;
    std::string at;
    {
      std::lock_guard lock(mu);
      auto it = runs.find(attempt);
      if (it == runs.end()) return;
      run = it->second;
      runs.erase(it);
      run->attempt = 0;
      auto& n = nodes[run->node];
      if (n.runs > 0) --n.runs;
      at = n.endpoint.text();
    }
    auto outcome = run_outcome_from_wire(text);
    if (!outcome) return fail_run(run, RunStatus::failed, "node " + at + ": " + outcome.error().message);
    RunResult result = std::move(outcome->result);
    result.run_id = run->id;
    result.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - run->start).count();
    outcome->finished.run_id = run->id;
    finish_run(run, std::move(result), outcome->finished);
  }

  // Ends `run` here (its node is gone or could not run it): the agents as its events
  // left them, `status`, and a run_finished event whose text is `error`.
  void fail_run(const std::shared_ptr<Run>& run, RunStatus status, const std::string& error) {
    RunResult result;
    {
      std::lock_guard record(run->mu);
      if (run->done) return;
      result = run->result;
    }
    result.status = status;
    result.error = error;
    result.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - run->start).count();
    Event finished;
    finished.kind = Event::Kind::run_finished;
    finished.run_id = run->id;
    finished.status = status;
    finished.text = error;
    finish_run(run, std::move(result), finished);
  }

  // The result first (the server reads it once it sees run_finished), then the event.
  static void finish_run(const std::shared_ptr<Run>& run, RunResult result, const Event& finished) {
    {
      std::lock_guard record(run->mu);
      if (run->done) return;
      run->result = std::move(result);
      run->done = true;
    }
    run->cv.notify_all();
    std::lock_guard delivery(run->events_mu);
    auto on_event = std::move(run->on_event);  // no event follows; it may own what owns the run
    run->on_event = nullptr;
    if (on_event) on_event(finished);
  }

  // The snapshot a run's events give: agents started, then finished with their output.
  static void note_event(RunResult& result, const Event& event) {
    if (event.kind != Event::Kind::agent_started && event.kind != Event::Kind::agent_finished) return;
    auto it = std::find_if(result.agents.begin(), result.agents.end(),
                           [&](const AgentResult& a) { return a.id == event.agent_id; });
    if (it == result.agents.end()) {
      result.agents.emplace_back();
      it = std::prev(result.agents.end());
      it->id = event.agent_id;
    }
    if (const auto* status = std::get_if<AgentStatus>(&event.status)) it->status = *status;
    if (event.kind == Event::Kind::agent_finished) it->output = event.text;
  }
};

namespace {

struct InboxState {
  std::map<caf::actor_addr, std::size_t> nodes;  // monitored node actor -> index
};

InboxActor::behavior_type inbox_actor(InboxActor::stateful_pointer<InboxState> self, ClusterBackend::State* state) {
  self->set_down_handler([self, state](caf::down_msg& down) {
    auto it = self->state.nodes.find(down.source);
    if (it == self->state.nodes.end()) return;
    state->on_node_down(it->second, self->system().render(down.reason));
  });
  return {
      [self](watch_atom, const NodeActor& node, std::size_t index) {
        self->state.nodes[node.address()] = index;
        self->monitor(node);
        // The node's KV events keep its index true (evictions included).
        self->send(node, node_kv_subscribe_atom::value, caf::actor_cast<KvListener>(self), std::uint64_t(index));
      },
      [state](node_kv_atom, std::uint64_t index, const std::string& text) { state->on_kv_event(index, text); },
      [state](node_piece_atom, std::uint64_t id, const std::string& piece) { state->on_piece(id, piece); },
      [state](node_done_atom, std::uint64_t id, const std::string& text) { state->on_done(id, text); },
  };
}

RunListener::behavior_type run_inbox_actor(RunListener::pointer, ClusterBackend::State* state) {
  return {
      [state](node_run_event_atom, std::uint64_t id, const std::string& text) { state->on_run_event(id, text); },
      [state](node_run_done_atom, std::uint64_t id, const std::string& text) { state->on_run_done(id, text); },
  };
}

class ClusterRun : public server::RunControl {
 public:
  ClusterRun(std::weak_ptr<ClusterBackend::State> state, std::shared_ptr<ClusterBackend::State::Run> run)
      : state_(std::move(state)), run_(std::move(run)) {}
  std::string id() const override { return run_->id; }
  bool done() const override {
    std::lock_guard lock(run_->mu);
    return run_->done;
  }
  RunResult snapshot() const override {
    std::lock_guard lock(run_->mu);
    RunResult r = run_->result;
    if (!run_->done)
      r.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - run_->start).count();
    return r;
  }
  RunResult wait() override {
    std::unique_lock lock(run_->mu);
    run_->cv.wait(lock, [&] { return run_->done; });
    return run_->result;
  }
  // Reaches the run's node, which ends it "cancelled" (its outcome comes back as usual).
  void cancel() override {
    auto state = state_.lock();
    if (!state) return;
    std::lock_guard lock(state->mu);
    run_->cancelled = true;
    if (run_->attempt == 0) return;
    const auto& node = state->nodes[run_->node];
    if (node.up) caf::anon_send(node.actor, node_run_cancel_atom::value, run_->attempt, state->run_inbox);
  }

 private:
  std::weak_ptr<ClusterBackend::State> state_;
  std::shared_ptr<ClusterBackend::State::Run> run_;
};

class ClusterGeneration : public server::Generation {
 public:
  ClusterGeneration(std::weak_ptr<ClusterBackend::State> state, std::uint64_t id) : state_(std::move(state)), id_(id) {}
  void cancel() override {
    auto state = state_.lock();
    if (!state) return;
    std::lock_guard lock(state->mu);
    auto it = state->pending.find(id_);
    if (it == state->pending.end()) return;
    const auto& node = state->nodes[it->second.node];
    if (node.up) caf::anon_send(node.actor, node_cancel_atom::value, id_, ReplyListener{state->inbox});
  }

 private:
  std::weak_ptr<ClusterBackend::State> state_;
  std::uint64_t id_;
};

}  // namespace

Result<std::unique_ptr<ClusterBackend>> ClusterBackend::connect(ClusterOptions options) {
  if (options.nodes.empty()) return fail(ErrorCode::invalid_argument, "a cluster needs at least one node (--nodes)");
  auto state = std::make_shared<State>();
  auto file = model::GgufFile::open(options.model_path);
  if (!file) return std::unexpected(file.error());
  state->file = std::make_unique<model::GgufFile>(std::move(*file));
  auto tokenizer = model::Tokenizer::from_gguf(*state->file);
  if (!tokenizer) return std::unexpected(tokenizer.error());
  state->tokenizer = std::move(*tokenizer);
  state->chat = std::make_unique<model::ChatTemplate>(model::ChatTemplate::from_gguf(*state->file));
  const std::string model = file_model_name(*state->file, options.model_path);

  if (auto tls = check_cluster_tls(options.tls); !tls) return std::unexpected(tls.error());
  state->config = std::make_unique<NetConfig>(options.tls);
  state->system = std::make_unique<caf::actor_system>(*state->config);
  auto& system = *state->system;
  std::vector<State::Node> nodes;
  for (std::size_t i = 0; i < options.nodes.size(); ++i) {
    const auto& at = options.nodes[i];
    auto actor = connect_node(system, at);
    if (!actor) return std::unexpected(actor.error());
    auto text = ask(system, *actor, at, node_info_atom::value, std::chrono::seconds(30));
    if (!text) return std::unexpected(text.error());
    auto info = info_from_wire(*text);
    if (!info) return std::unexpected(info.error());
    if (info->model != model)
      return fail(ErrorCode::invalid_argument, "node " + at.text() + " serves model '" + info->model +
                                                   "', the router tokenizes with '" + model + "' (" +
                                                   options.model_path + "); give --model the nodes' model file");
    if (i == 0) {
      state->info = *info;
    } else {
      state->info.context_length = std::min(state->info.context_length, info->context_length);
    }
    nodes.push_back(State::Node{at, *actor, PrefixIndex(info->page_size, index_capacity(*info))});
  }
  state->options = std::move(options);
  state->nodes = std::move(nodes);
  state->inbox = system.spawn(inbox_actor, state.get());
  state->run_inbox = system.spawn(run_inbox_actor, state.get());
  for (std::size_t i = 0; i < state->nodes.size(); ++i)
    caf::anon_send(state->inbox, watch_atom::value, state->nodes[i].actor, i);
  state->rejoiner = std::thread([raw = state.get(), period = state->options.rejoin_period] { raw->rejoin_loop(period); });
  return std::unique_ptr<ClusterBackend>(new ClusterBackend(std::move(state)));
}

ClusterBackend::ClusterBackend(std::shared_ptr<State> state) : state_(std::move(state)) {}
ClusterBackend::~ClusterBackend() = default;

std::string ClusterBackend::model_name() const { return state_->info.model; }
std::size_t ClusterBackend::context_length() const { return state_->info.context_length; }

Result<std::shared_ptr<server::Generation>> ClusterBackend::start_generate(
    const GenerateRequest& request, std::function<void(const std::string&)> on_token,
    std::function<void(const Result<GenerateResult>&)> on_done) {
  auto signatures = request_tools(request);
  if (!signatures) return std::unexpected(signatures.error());
  auto prompt = prompt_ids(request, *signatures, *state_->tokenizer, *state_->chat);
  if (!prompt) return std::unexpected(prompt.error());
  State::Pending p;
  p.tenant = request.tenant.empty() ? "default" : request.tenant;
  p.wire = to_wire(request);
  p.prompt = std::move(*prompt);
  p.on_token = std::move(on_token);
  p.on_done = std::move(on_done);
  std::lock_guard lock(state_->mu);
  const std::uint64_t id = state_->next_id++;
  auto [it, added] = state_->pending.emplace(id, std::move(p));
  if (!state_->dispatch(id, it->second)) {
    state_->pending.erase(it);
    std::string list;
    for (const auto& n : state_->nodes) list += (list.empty() ? "" : ", ") + n.endpoint.text();
    // out_of_memory is the server's 503: the cluster has no capacity left at all.
    return fail(ErrorCode::out_of_memory, "no cluster node is up (down: " + list + "); restart the nodes, then the router");
  }
  return std::make_shared<ClusterGeneration>(state_, id);
}

Result<std::shared_ptr<server::RunControl>> ClusterBackend::start_run(const std::string& workflow_json,
                                                                      const std::map<std::string, std::string>& inputs,
                                                                      EventCallback on_event, const std::string& tenant,
                                                                      const DocumentAccess& documents) {
  // Validated here as Runtime::start does (the same diagnostics, before any node is
  // chosen; the node validates again), with the tools every `arbor node` has.
  auto plan = workflows::load_workflow_text(workflow_json, documents, inputs);
  if (!plan) return fail(ErrorCode::invalid_argument, plan.error().format());
  auto unknown = workflows::check_agent_tools(*plan, workflows::ToolRegistry::builtins(), "<text>");
  if (unknown.has_errors()) return fail(ErrorCode::invalid_argument, unknown.format());

  // The prefix files, read here under the server's policy: their bytes go with the run.
  RunRequest request{workflow_json, inputs, tenant, {}};
  if (auto doc = parse_json_text(workflow_json)) {
    workflows::Diagnostics ignored;
    const auto spec = workflows::parse_spec(*doc, workflows::PositionIndex::build(workflow_json), ignored);
    for (const auto& prefix : spec.prefixes)
      for (const auto& d : prefix.documents) {
        if (!d.file || request.documents.contains(*d.file)) continue;
        auto bytes = workflows::read_prefix_document(documents, *d.file);
        if (!bytes) return fail(ErrorCode::invalid_argument, bytes.error());
        request.documents.emplace(*d.file, std::move(*bytes));
      }
  }

  auto run = std::make_shared<State::Run>();
  run->tenant = tenant.empty() ? "default" : tenant;
  run->wire = to_wire(request);
  // Each shared prefix's ids as its agents compute them (actors/agent.cpp: prefix_ids).
  for (const auto& [id, prefix] : plan->prefixes) {
    if (prefix.text.empty()) continue;
    actors::Conversation conversation(*state_->tokenizer, *state_->chat);
    conversation.start(prefix.text, "");
    if (!conversation.system_ids().empty()) run->prefixes.push_back(conversation.system_ids());
  }
  // A whole run is retried on another node only as often as each of its agents may be.
  int retries = 10;
  bool any = false;
  plan->visit([&](const workflows::AgentPlan& a) {
    retries = std::min(retries, a.max_retries);
    any = true;
  });
  run->max_attempts = 1 + (any ? retries : 0);
  run->start = std::chrono::steady_clock::now();
  run->on_event = std::move(on_event);
  run->result.workflow = plan->name;
  run->result.tenant = run->tenant;
  run->result.status = RunStatus::running;
  plan->visit([&](const workflows::AgentPlan& a) {
    if (a.dynamic) return;
    auto& agent = run->result.agents.emplace_back();
    agent.id = a.id;
    agent.parent = a.parent_id;
  });

  std::lock_guard lock(state_->mu);
  run->id = "run-" + std::to_string(state_->next_run++);
  run->result.run_id = run->id;
  if (!state_->dispatch_run(run)) {
    std::string list;
    for (const auto& n : state_->nodes) list += (list.empty() ? "" : ", ") + n.endpoint.text();
    return fail(ErrorCode::out_of_memory,
                "no cluster node is up (down: " + list + "); restart the nodes, then the router");
  }
  return std::make_shared<ClusterRun>(state_, run);
}

std::string ClusterBackend::run_json(const RunResult& result) const { return to_json(result); }

CacheStats ClusterBackend::cache_stats() const {
  CacheStats total;
  for (const auto& stats : ask_node_stats()) {
    if (!stats) continue;
    const auto& s = stats->cache;
    total.usage() += s.usage();
    total.warmup_tokens += s.warmup_tokens;
    total.pages_total += s.pages_total;
    total.pages_used += s.pages_used;
    total.pages_free += s.pages_free;
    total.pages_locked += s.pages_locked;
    total.pages_cached_idle += s.pages_cached_idle;
    total.pages_pinned += s.pages_pinned;
    total.pins += s.pins;
    total.evictions += s.evictions;
    total.live_sequences += s.live_sequences;
    total.queued_requests += s.queued_requests;
    total.batched_steps += s.batched_steps;
    total.step_seconds += s.step_seconds;
    total.forward_seconds += s.forward_seconds;
    total.graph_steps_replayed += s.graph_steps_replayed;
    total.graph_steps_captured += s.graph_steps_captured;
    for (const auto& [name, t] : s.tenants) {
      auto& to = total.tenants[name];
      add(to, t);
      to.used_pages += t.used_pages;
      to.quota_pages += t.quota_pages;
      to.num_sequences += t.num_sequences;
    }
  }
  total.hit_ratio = hit_ratio(total.usage());
  return total;
}

std::vector<CacheTreeNode> ClusterBackend::cache_tree(const std::string& tenant, std::size_t max_nodes) const {
  const auto handles = state_->handles();
  const std::size_t up = std::count_if(handles.begin(), handles.end(), [](const auto& h) { return bool(h.first); });
  const std::size_t share = std::max<std::size_t>(1, max_nodes / std::max<std::size_t>(1, up));
  std::vector<CacheTreeNode> out;
  std::uint64_t next_id = 1;  // the nodes' ids overlap: renumbered, parents first as each node lists them
  for (const auto& [actor, at] : handles) {
    if (!actor || out.size() >= max_nodes) continue;
    auto text = ask(*state_->system, actor, at, node_tree_atom::value, std::chrono::seconds(2), tenant,
                    std::uint64_t(std::min(share, max_nodes - out.size())));
    auto tree = text ? tree_from_wire(*text) : Result<std::vector<CacheTreeNode>>(std::unexpected(text.error()));
    if (!tree) continue;
    std::map<std::uint64_t, std::uint64_t> ids;  // the node's id -> ours
    for (auto& n : *tree) ids[n.id] = next_id++;
    for (auto& n : *tree) {
      n.id = ids[n.id];
      auto parent = ids.find(n.parent_id);
      n.parent_id = parent == ids.end() ? 0 : parent->second;
      n.node = at.text();
      out.push_back(std::move(n));
    }
  }
  return out;
}

// Each node's own figures, in the order of nodes(); nothing for a node that is down or
// does not answer within 2 s.
std::vector<std::optional<NodeStats>> ClusterBackend::ask_node_stats() const {
  const auto handles = state_->handles();
  std::vector<std::optional<NodeStats>> stats(handles.size());
  for (std::size_t i = 0; i < handles.size(); ++i) {
    if (!handles[i].first) continue;
    auto text = ask(*state_->system, handles[i].first, handles[i].second, node_stats_atom::value,
                    std::chrono::seconds(2));
    if (!text) continue;
    if (auto s = stats_from_wire(*text)) stats[i] = std::move(*s);
  }
  return stats;
}

std::string ClusterBackend::metrics_text() const {
  const auto views = nodes();
  const auto stats = ask_node_stats();
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help, auto value) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
    for (std::size_t i = 0; i < views.size(); ++i) value(name, "node=\"" + views[i].endpoint + "\"", i);
  };
  auto sample = [&](const std::string& name, const std::string& labels, double v) {
    char num[64];
    std::snprintf(num, sizeof num, "%.17g", v);
    out += name + "{" + labels + "} " + num + "\n";
  };
  auto by_route = [&](const std::string& name, const std::string& labels, const RouteCounts& counts) {
    for (RouteKind kind : kRouteKinds)
      sample(name, labels + ",route=\"" + to_string(kind) + "\"", double(counts[kind]));
  };
  family("arbor_cluster_node_up", "gauge", "1 while the router reaches the node, 0 while it is down.",
         [&](auto n, auto l, auto i) { sample(n, l, views[i].up); });
  family("arbor_cluster_node_inflight", "gauge", "Requests the router has in flight on the node.",
         [&](auto n, auto l, auto i) { sample(n, l, double(views[i].inflight)); });
  family("arbor_cluster_node_indexed_pages", "gauge", "Pages the router's prefix index lists for the node.",
         [&](auto n, auto l, auto i) { sample(n, l, double(views[i].indexed_pages)); });
  family("arbor_cluster_routed_total", "counter",
         "Requests sent to the node, by routing decision (prefix: longest cached prefix; balance: the prefix "
         "holder was overloaded; cold: no prefix anywhere).",
         [&](auto n, auto l, auto i) { by_route(n, l, views[i].routed); });
  family("arbor_cluster_matched_tokens_total", "counter",
         "Prompt tokens the router's index matched on the node when it sent requests there.",
         [&](auto n, auto l, auto i) { sample(n, l, double(views[i].matched_tokens)); });
  family("arbor_cluster_retried_total", "counter", "Requests sent again to the node after their node went down.",
         [&](auto n, auto l, auto i) { sample(n, l, double(views[i].retried_here)); });
  family("arbor_cluster_rejoins_total", "counter", "Times the node came back after being down.",
         [&](auto n, auto l, auto i) { sample(n, l, double(views[i].rejoins)); });
  family("arbor_cluster_node_runs", "gauge", "Workflow runs the router has in flight on the node.",
         [&](auto n, auto l, auto i) { sample(n, l, double(views[i].runs)); });
  family("arbor_cluster_runs_routed_total", "counter",
         "Workflow runs sent to the node (all of a run's agents run there), by routing decision on the run's "
         "shared prefixes (prefix, balance, cold: as arbor_cluster_routed_total).",
         [&](auto n, auto l, auto i) { by_route(n, l, views[i].runs_routed); });
  family("arbor_cluster_runs_retried_total", "counter",
         "Workflow runs sent again to the node after their node went down.",
         [&](auto n, auto l, auto i) { sample(n, l, double(views[i].runs_retried_here)); });
  family("arbor_cluster_kv_events_total", "counter",
         "KV events (pages stored, removed) from the node applied to the router's prefix index.",
         [&](auto n, auto l, auto i) { sample(n, l, double(views[i].kv_events)); });
  auto from_node = [&](const char* name, const char* help, auto field) {
    family(name, "gauge", help, [&](auto n, auto l, auto i) {
      if (stats[i]) sample(n, l, field(*stats[i]));
    });
  };
  from_node("arbor_cluster_node_pages_total", "The node's KV pages.",
            [](const NodeStats& s) { return double(s.cache.pages_total); });
  from_node("arbor_cluster_node_pages_free", "The node's free KV pages.",
            [](const NodeStats& s) { return double(s.cache.pages_free); });
  from_node("arbor_cluster_node_queued_requests", "Requests waiting for admission on the node.",
            [](const NodeStats& s) { return double(s.cache.queued_requests); });
  from_node("arbor_cluster_node_hit_ratio", "The node's cached / prompt tokens.",
            [](const NodeStats& s) { return s.cache.hit_ratio; });
  return out;
}

namespace {

nlohmann::ordered_json route_counts_json(const RouteCounts& counts) {
  nlohmann::ordered_json o;
  for (RouteKind kind : kRouteKinds) o[to_string(kind)] = counts[kind];
  return o;
}

}  // namespace

std::string ClusterBackend::nodes_json() const {
  const auto views = nodes();
  const auto stats = ask_node_stats();
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < views.size(); ++i) {
    const NodeView& v = views[i];
    nlohmann::ordered_json o;
    o["node"] = v.endpoint;
    o["up"] = v.up;
    o["inflight"] = v.inflight;
    o["indexed_pages"] = v.indexed_pages;
    o["routed"] = route_counts_json(v.routed);
    o["matched_tokens"] = v.matched_tokens;
    o["retried"] = v.retried_here;
    o["rejoins"] = v.rejoins;
    o["runs"] = v.runs;
    o["runs_routed"] = route_counts_json(v.runs_routed);
    o["runs_retried"] = v.runs_retried_here;
    // The node's own figures; null while it is down or does not answer.
    o["pages_total"] = nullptr;
    o["pages_free"] = nullptr;
    o["queued_requests"] = nullptr;
    o["hit_ratio"] = nullptr;
    if (i < stats.size() && stats[i]) {
      const CacheStats& c = stats[i]->cache;
      o["pages_total"] = c.pages_total;
      o["pages_free"] = c.pages_free;
      o["queued_requests"] = c.queued_requests;
      o["hit_ratio"] = c.hit_ratio;
    }
    out.push_back(std::move(o));
  }
  return out.dump();
}

Result<KvEventSubscription> ClusterBackend::subscribe_kv_events(std::function<void(const KvEvent&)> callback) {
  return subscribe(state_->kv_events, std::move(callback));
}

std::vector<NodeView> ClusterBackend::nodes() const {
  std::lock_guard lock(state_->mu);
  std::vector<NodeView> out;
  for (const auto& n : state_->nodes) {
    out.push_back({n.endpoint.text(), n.up, n.inflight, n.index.num_pages(), n.routed, n.matched_tokens,
                   n.retried_here, n.rejoins});
    auto& v = out.back();
    v.runs = n.runs;
    v.runs_routed = n.runs_routed;
    v.runs_retried_here = n.runs_retried_here;
    v.kv_events = n.kv_events;
  }
  return out;
}

Result<NodeStats> query_node_stats(const Endpoint& node, const ClusterTls& tls) {
  if (auto checked = check_cluster_tls(tls); !checked) return std::unexpected(checked.error());
  NetConfig config(tls);
  caf::actor_system system{config};
  Result<NodeStats> out = fail(ErrorCode::internal, "unset");
  {
    auto actor = connect_node(system, node);
    if (!actor) return std::unexpected(actor.error());
    auto text = ask(system, *actor, node, node_stats_atom::value, std::chrono::seconds(10));
    out = text ? stats_from_wire(*text) : Result<NodeStats>(std::unexpected(text.error()));
  }
  return out;
}

}  // namespace arbor::cluster

#include "runtime/cluster/cluster_backend.hpp"

#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <optional>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "model/chat_template.hpp"
#include "model/gguf.hpp"
#include "model/tokenizer.hpp"
#include "runtime/chat_prompt.hpp"
#include "runtime/cluster/net_config.hpp"
#include "runtime/cluster/route_policy.hpp"

namespace arbor::cluster {
namespace {

using watch_atom = caf::atom_constant<caf::atom("nwatch")>;

// The router's inbox: what the nodes send back (ReplyListener, the only handle a node
// gets) plus the router's own request to watch a node.
using InboxActor = ReplyListener::extend<caf::reacts_to<watch_atom, NodeActor, std::size_t>>;

// CAF checks the node's published interface against NodeActor on connect.
Result<NodeActor> connect_node(caf::actor_system& system, const Endpoint& node) {
  auto actor = system.middleman().remote_actor<NodeActor>(node.host, node.port);
  if (actor) return *actor;
  if (actor.error() == caf::sec::unexpected_actor_messaging_interface)
    return fail(ErrorCode::unsupported, "the process at " + node.text() +
                                            " is not an `arbor node` of this arbor build (its actor interface differs "
                                            "from this router's); run this build's `arbor node --listen " +
                                            node.text() + "` there");
  return fail(ErrorCode::unsupported, "cannot reach node " + node.text() + " (" + system.render(actor.error()) +
                                          "); start it with `arbor node --listen " + node.text() + "`");
}

// Asks `node` one question whose answer is a string; errors name the node.
template <class Atom>
Result<std::string> ask(caf::actor_system& system, const NodeActor& node, const Endpoint& at, Atom atom,
                        std::chrono::seconds timeout) {
  caf::scoped_actor self{system};
  Result<std::string> out = fail(ErrorCode::timeout, "node " + at.text() + " did not answer");
  self->request(node, timeout, atom)
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
    std::uint64_t routed[3] = {0, 0, 0};  // by RouteKind
    std::uint64_t matched_tokens = 0, retried_here = 0, rejoins = 0;
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
  NetConfig config;  // outlives the system
  std::unique_ptr<caf::actor_system> system;
  InboxActor inbox;  // receives the nodes' pieces, outcomes and down messages

  mutable std::mutex mu;
  std::condition_variable wake;  // the rejoiner's sleep; stopping ends it
  bool stopping = false;
  std::thread rejoiner;
  std::vector<Node> nodes;
  std::map<std::uint64_t, Pending> pending;
  std::uint64_t next_id = 1;
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
    if (inbox) caf::anon_send_exit(inbox, caf::exit_reason::user_shutdown);
    inbox = nullptr;
    for (auto& n : nodes) n.actor = nullptr;
    system.reset();  // waits for the inbox to quit
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
        auto actor = system->middleman().remote_actor<NodeActor>(at.host, at.port);
        if (!actor) continue;
        auto text = ask(*system, *actor, at, node_info_atom::value, std::chrono::seconds(10));
        auto info = text ? info_from_wire(*text) : Result<NodeInfo>(std::unexpected(text.error()));
        if (!info || info->model != this->info.model) continue;
        std::lock_guard relock(mu);
        auto& n = nodes[index];
        n.actor = *actor;
        n.index = PrefixIndex(info->page_size, info->pages_total);
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
      loads.push_back({n.up, n.inflight, n.up ? n.index.match(p.tenant, p.prompt) : 0, n.index.num_pages()});
    auto choice = options.routing == Routing::cache_aware ? choose_node(loads, options.overload_margin)
                                                          : next_in_turn(loads);
    if (!choice) return false;
    auto& n = nodes[choice->node];
    ++n.inflight;
    ++n.routed[static_cast<int>(choice->kind)];
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

  void on_node_down(std::size_t index, const std::string& reason) {
    std::vector<Failure> failures;
    {
      std::lock_guard lock(mu);
      auto& node = nodes[index];
      if (!node.up) return;
      node.up = false;
      node.inflight = 0;
      node.index.clear();
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
    }
    for (auto& [done, error] : failures)
      if (done) done(std::unexpected(error));
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
      },
      [state](node_piece_atom, std::uint64_t id, const std::string& piece) { state->on_piece(id, piece); },
      [state](node_done_atom, std::uint64_t id, const std::string& text) { state->on_done(id, text); },
  };
}

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

  state->system = std::make_unique<caf::actor_system>(state->config);
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
    nodes.push_back(State::Node{at, *actor, PrefixIndex(info->page_size, info->pages_total)});
  }
  state->options = std::move(options);
  state->nodes = std::move(nodes);
  state->inbox = system.spawn(inbox_actor, state.get());
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

Result<std::shared_ptr<server::RunControl>> ClusterBackend::start_run(const std::string&,
                                                                      const std::map<std::string, std::string>&,
                                                                      EventCallback, const std::string&,
                                                                      const DocumentAccess&) {
  return fail(ErrorCode::unsupported,
              "workflow runs are not routed to cluster nodes yet: `arbor serve --nodes` serves /v1/chat/completions "
              "and /v1/completions; post runs to an `arbor serve` without --nodes");
}

std::string ClusterBackend::run_json(const RunResult& result) const { return to_json(result); }

CacheStats ClusterBackend::cache_stats() const {
  std::vector<std::pair<NodeActor, Endpoint>> up;
  {
    std::lock_guard lock(state_->mu);
    for (const auto& n : state_->nodes)
      if (n.up) up.emplace_back(n.actor, n.endpoint);
  }
  CacheStats total;
  for (const auto& [actor, at] : up) {
    auto text = ask(*state_->system, actor, at, node_stats_atom::value, std::chrono::seconds(2));
    if (!text) continue;
    auto stats = stats_from_wire(*text);
    if (!stats) continue;
    const auto& s = stats->cache;
    total.prompt_tokens += s.prompt_tokens;
    total.cached_tokens += s.cached_tokens;
    total.computed_tokens += s.computed_tokens;
    total.generated_tokens += s.generated_tokens;
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
    for (const auto& [name, t] : s.tenants) {
      auto& to = total.tenants[name];
      add(to, t);
      to.used_pages += t.used_pages;
      to.quota_pages += t.quota_pages;
      to.num_sequences += t.num_sequences;
    }
  }
  total.hit_ratio = total.prompt_tokens ? double(total.cached_tokens) / double(total.prompt_tokens) : 0.0;
  return total;
}

std::vector<CacheTreeNode> ClusterBackend::cache_tree(const std::string&, std::size_t) const { return {}; }

// Each node's own figures, in the order of nodes(); nothing for a node that is down or
// does not answer within 2 s.
std::vector<std::optional<NodeStats>> ClusterBackend::ask_node_stats() const {
  std::vector<std::pair<NodeActor, Endpoint>> handles;
  {
    std::lock_guard lock(state_->mu);
    for (const auto& n : state_->nodes) handles.emplace_back(n.up ? n.actor : NodeActor{}, n.endpoint);
  }
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
  family("arbor_cluster_node_up", "gauge", "1 while the router reaches the node, 0 while it is down.",
         [&](auto n, auto l, auto i) { sample(n, l, views[i].up); });
  family("arbor_cluster_node_inflight", "gauge", "Requests the router has in flight on the node.",
         [&](auto n, auto l, auto i) { sample(n, l, double(views[i].inflight)); });
  family("arbor_cluster_node_indexed_pages", "gauge", "Pages the router's prefix index lists for the node.",
         [&](auto n, auto l, auto i) { sample(n, l, double(views[i].indexed_pages)); });
  family("arbor_cluster_routed_total", "counter",
         "Requests sent to the node, by routing decision (prefix: longest cached prefix; balance: the prefix "
         "holder was overloaded; cold: no prefix anywhere).",
         [&](auto n, auto l, auto i) {
           sample(n, l + ",route=\"prefix\"", double(views[i].routed_prefix));
           sample(n, l + ",route=\"balance\"", double(views[i].routed_balance));
           sample(n, l + ",route=\"cold\"", double(views[i].routed_cold));
         });
  family("arbor_cluster_matched_tokens_total", "counter",
         "Prompt tokens the router's index matched on the node when it sent requests there.",
         [&](auto n, auto l, auto i) { sample(n, l, double(views[i].matched_tokens)); });
  family("arbor_cluster_retried_total", "counter", "Requests sent again to the node after their node went down.",
         [&](auto n, auto l, auto i) { sample(n, l, double(views[i].retried_here)); });
  family("arbor_cluster_rejoins_total", "counter", "Times the node came back after being down.",
         [&](auto n, auto l, auto i) { sample(n, l, double(views[i].rejoins)); });
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
    o["routed"] = {{"prefix", v.routed_prefix}, {"balance", v.routed_balance}, {"cold", v.routed_cold}};
    o["matched_tokens"] = v.matched_tokens;
    o["retried"] = v.retried_here;
    o["rejoins"] = v.rejoins;
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

std::vector<NodeView> ClusterBackend::nodes() const {
  std::lock_guard lock(state_->mu);
  std::vector<NodeView> out;
  for (const auto& n : state_->nodes)
    out.push_back({n.endpoint.text(), n.up, n.inflight, n.index.num_pages(), n.routed[0], n.routed[1], n.routed[2],
                   n.matched_tokens, n.retried_here, n.rejoins});
  return out;
}

Result<NodeStats> query_node_stats(const Endpoint& node) {
  NetConfig config;
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

// Routing, authentication, admission and the small read-only endpoints.
#include "runtime/server/api.hpp"

#include <ctime>

#include "runtime/server/route_table.hpp"

namespace arbor::server {
namespace {

std::pair<std::string, std::string> split_target(const std::string& target) {
  const auto q = target.find('?');
  if (q == std::string::npos) return {target, ""};
  return {target.substr(0, q), target.substr(q + 1)};
}

std::string query_param(const std::string& query, const std::string& key) {
  std::size_t pos = 0;
  while (pos <= query.size()) {
    auto amp = query.find('&', pos);
    if (amp == std::string::npos) amp = query.size();
    const std::string pair = query.substr(pos, amp - pos);
    const auto eq = pair.find('=');
    if (pair.substr(0, eq) == key) return eq == std::string::npos ? "" : pair.substr(eq + 1);
    pos = amp + 1;
  }
  return "";
}

// Constant-time comparison, so a key cannot be guessed byte by byte from timing.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned diff = a.size() != b.size();
  for (std::size_t i = 0; i < a.size(); ++i) diff |= unsigned(a[i]) ^ unsigned(i < b.size() ? b[i] : 0);
  return diff == 0;
}

}  // namespace

Api::Api(const ServerConfig& config, Backend& backend)
    : config_(config), backend_(backend), runs_(config.max_runs, config.max_run_bytes) {}

std::string Api::next_id(const char* prefix) {
  return std::string(prefix) + std::to_string(std::time(nullptr)) + "-" + std::to_string(next_id_++);
}

std::optional<Principal> Api::authenticate(const HttpRequest& request) const {
  if (!config_.auth) return Principal{config_.default_tenant, true};
  const std::string& h = request.authorization;
  if (h.size() <= 7 || !(h.compare(0, 7, "Bearer ") == 0 || h.compare(0, 7, "bearer ") == 0)) return std::nullopt;
  const std::string key = h.substr(7);
  std::optional<Principal> found;
  if (!config_.admin_key.empty() && same_secret(key, config_.admin_key)) found = Principal{config_.default_tenant, true};
  for (const auto& [k, tenant] : config_.keys)
    if (same_secret(key, k)) found = Principal{tenant, false};
  return found;
}

void Api::reply(const ExchangePtr& ex, const std::string& tenant, const std::string& route, HttpReply r) {
  metrics_.count_request(tenant, route, r.status);
  ex->respond(std::move(r));
}

void Api::reply_json(const ExchangePtr& ex, const std::string& tenant, const std::string& route, int status,
                     const std::string& body) {
  HttpReply r;
  r.status = status;
  r.body = body;
  reply(ex, tenant, route, std::move(r));
}

void Api::reply_error(const ExchangePtr& ex, const std::string& tenant, const std::string& route, const ApiError& e) {
  HttpReply r;
  r.status = e.status;
  r.body = error_body(e);
  if (e.status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  if (e.status == 429 || e.status == 503) r.headers.emplace_back("Retry-After", "1");
  reply(ex, tenant, route, std::move(r));
}

// One request as a handler sees it: `p` is the caller (for a route that needs no key,
// the default tenant as admin) and `id` the path's {id}, if its pattern has one.
struct Api::Call {
  const HttpRequest& req;
  const ExchangePtr& ex;
  const Principal& p;
  const std::string& id;
};

// METHOD pattern -> handler. The pattern is the route's metrics label; a route that
// needs no key is answered before authentication.
struct Api::Route {
  std::string_view method;
  std::string_view pattern;
  bool needs_key;
  void (*handler)(Api& api, const Call& call);
};

const Api::Route Api::kRoutes[] = {
    {"GET", "/", false, [](Api& a, const Call& c) { a.dashboard(c.ex); }},
    {"GET", "/health", false, [](Api& a, const Call& c) { a.health(c.ex); }},
    {"GET", "/metrics", true, [](Api& a, const Call& c) { a.prometheus(c.ex, c.p); }},
    {"GET", "/v1/models", true, [](Api& a, const Call& c) { a.models(c.ex, c.p); }},
    {"POST", "/v1/chat/completions", true, [](Api& a, const Call& c) { a.completions(c.req, c.ex, c.p, true); }},
    {"POST", "/v1/completions", true, [](Api& a, const Call& c) { a.completions(c.req, c.ex, c.p, false); }},
    {"GET", "/v1/runs", true, [](Api& a, const Call& c) { a.list_runs(c.ex, c.p); }},
    {"POST", "/v1/runs", true, [](Api& a, const Call& c) { a.start_run(c.req, c.ex, c.p); }},
    {"GET", "/v1/runs/{id}", true, [](Api& a, const Call& c) { a.run_request(c.req, c.ex, c.p, c.id, false); }},
    {"DELETE", "/v1/runs/{id}", true, [](Api& a, const Call& c) { a.run_request(c.req, c.ex, c.p, c.id, false); }},
    {"GET", "/v1/runs/{id}/events", true, [](Api& a, const Call& c) { a.run_request(c.req, c.ex, c.p, c.id, true); }},
    {"GET", "/v1/cache/stats", true, [](Api& a, const Call& c) { a.cache_stats(c.ex, c.p); }},
    {"GET", "/v1/cache/tree", true, [](Api& a, const Call& c) { a.cache_tree(c.req, c.ex, c.p); }},
    {"GET", "/v1/kv_events", true, [](Api& a, const Call& c) { a.kv_events(c.ex, c.p); }},
};

void Api::handle(const HttpRequest& req, const ExchangePtr& ex) {
  const std::string path = split_target(req.target).first;
  const auto found = find_route(kRoutes, req.method, path);
  if (found.pattern.empty()) {
    // Only the path's shape is echoed, bounded, never the query.
    return reply_error(ex, "", "other", not_found("no endpoint at '" + path.substr(0, 200) +
                                                  "'; see GET /v1/models, POST /v1/chat/completions, POST /v1/runs"));
  }
  if (!found.route) {
    HttpReply r;
    r.status = 405;
    r.body = error_body(method_not_allowed(req.method.substr(0, 16), found.allowed));
    r.headers.emplace_back("Allow", found.allowed);
    return reply(ex, "", found.pattern, std::move(r));
  }
  if (!found.route->needs_key) {
    const Principal nobody{config_.default_tenant, false};
    return found.route->handler(*this, Call{req, ex, nobody, found.id});
  }
  const auto principal = authenticate(req);
  if (!principal) {
    return reply_error(ex, "", found.pattern,
                       unauthorized(req.authorization.empty()
                                        ? "missing API key; send 'Authorization: Bearer <key>'"
                                        : "unknown API key; check the key (keys are listed in the server config)"));
  }
  found.route->handler(*this, Call{req, ex, *principal, found.id});
}

void Api::dashboard(const ExchangePtr& ex) {
  HttpReply r;
  r.content_type = "text/html; charset=utf-8";
  r.body = dashboard_html();
  reply(ex, "", "/", std::move(r));
}

int Api::inflight() const { return admission_.inflight(); }

void Api::cancel_all() {
  std::vector<std::shared_ptr<Generation>> live;
  {
    std::lock_guard lock(live_mutex_);
    for (auto& [id, g] : live_)
      if (g) live.push_back(g);
  }
  for (auto& g : live) g->cancel();
  for (const auto& entry : runs_.all())
    if (auto control = entry->control(); control && !entry->finished()) control->cancel();
}

int Api::max_tokens_for(const std::string& tenant) const {
  auto it = config_.tenant_limits.find(tenant);
  if (it != config_.tenant_limits.end() && it->second.max_tokens > 0)
    return std::min(it->second.max_tokens, config_.max_tokens);
  return config_.max_tokens;
}

void Api::health(const ExchangePtr& ex) {
  nlohmann::ordered_json j;
  j["status"] = draining_ ? "draining" : "ok";
  j["model"] = backend_.model_name();
  j["auth"] = config_.auth;
  j["inflight"] = inflight();
  reply_json(ex, "", "/health", draining_ ? 503 : 200, dump(j));
}

void Api::models(const ExchangePtr& ex, const Principal& p) {
  nlohmann::ordered_json model;
  model["id"] = backend_.model_name();
  model["object"] = "model";
  model["created"] = 0;
  model["owned_by"] = "arbor";
  model["context_length"] = backend_.context_length();
  nlohmann::ordered_json j;
  j["object"] = "list";
  j["data"] = nlohmann::ordered_json::array({model});
  reply_json(ex, p.tenant, "/v1/models", 200, dump(j));
}

void Api::cache_stats(const ExchangePtr& ex, const Principal& p) {
  const CacheStats stats = backend_.cache_stats();
  auto j = cache_stats_json(stats, p.admin ? nullptr : &p.tenant);
  // The server's own per-tenant figures (requests served through it).
  nlohmann::ordered_json served = nlohmann::ordered_json::object();
  for (const auto& [t, f] : metrics_.snapshot()) {
    if (t.empty() || (!p.admin && t != p.tenant)) continue;
    nlohmann::ordered_json o = f.usage();
    o["warmup_tokens"] = f.warmup_tokens;
    o["hit_ratio"] = hit_ratio(f);
    o["generations"] = f.generations;
    o["runs"] = f.runs;
    o["inflight"] = f.inflight;
    served[t] = std::move(o);
  }
  j["served"] = std::move(served);
  if (p.admin) j["server"] = {{"inflight", inflight()}, {"max_inflight", config_.max_inflight}};
  // A cluster router's nodes (load and pages of the whole cluster: admins only).
  if (const std::string nodes = p.admin ? backend_.nodes_json() : ""; !nodes.empty())
    j["nodes"] = nlohmann::ordered_json::parse(nodes);
  reply_json(ex, p.tenant, "/v1/cache/stats", 200, dump(j));
}

void Api::cache_tree(const HttpRequest& req, const ExchangePtr& ex, const Principal& p) {
  const std::string query = split_target(req.target).second;
  std::size_t max_nodes = 256;
  if (std::string n = query_param(query, "max_nodes"); !n.empty()) {
    char* end = nullptr;
    const long v = std::strtol(n.c_str(), &end, 10);
    if (*end != '\0' || v < 1 || v > 4096)
      return reply_error(ex, p.tenant, "/v1/cache/tree", invalid_param("max_nodes", "must be an integer from 1 to 4096"));
    max_nodes = static_cast<std::size_t>(v);
  }
  std::string tenant = p.tenant;
  if (std::string t = query_param(query, "tenant"); !t.empty() && p.admin) tenant = t;
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (const auto& n : backend_.cache_tree(tenant, max_nodes)) {
    nlohmann::ordered_json o;
    o["id"] = n.id;
    o["parent"] = n.parent_id;
    o["tokens"] = n.num_tokens;
    o["depth"] = n.depth_tokens;
    o["hits"] = n.hit_count;
    o["locks"] = n.lock_count;
    o["shared"] = n.shared_namespace;
    o["snippet"] = n.snippet;
    if (!n.node.empty()) o["node"] = n.node;  // a cluster router's: the node holding it
    nodes.push_back(std::move(o));
  }
  nlohmann::ordered_json j;
  j["tenant"] = tenant;
  j["max_nodes"] = max_nodes;
  j["nodes"] = std::move(nodes);
  reply_json(ex, p.tenant, "/v1/cache/tree", 200, dump(j));
}

void Api::prometheus(const ExchangePtr& ex, const Principal& p) {
  HttpReply r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  r.body = metrics_.render(backend_.cache_stats(), inflight(),
                           p.admin ? std::nullopt : std::optional<std::string>(p.tenant));
  if (p.admin) r.body += backend_.metrics_text();
  reply(ex, p.tenant, "/metrics", std::move(r));
}

}  // namespace arbor::server

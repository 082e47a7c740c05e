// Routing, authentication, admission and the small read-only endpoints.
#include "runtime/server/api.hpp"

#include <ctime>

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

// A run id as the runtime makes them: short, [A-Za-z0-9_-.].
bool plausible_id(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

bool method_allowed(const std::string& allowed, const std::string& method) {
  std::size_t pos = 0;
  while (pos < allowed.size()) {
    auto comma = allowed.find(", ", pos);
    if (comma == std::string::npos) comma = allowed.size();
    if (allowed.compare(pos, comma - pos, method) == 0 && comma - pos == method.size()) return true;
    pos = comma + 2;
  }
  return false;
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

void Api::handle(const HttpRequest& req, const ExchangePtr& ex) {
  const auto [path, query] = split_target(req.target);
  // Route: a pattern name (the metrics label), the methods it takes, and whether it needs a key.
  std::string route, allowed, run_id;
  bool events = false;
  if (path == "/") route = "/", allowed = "GET";
  else if (path == "/health") route = "/health", allowed = "GET";
  else if (path == "/metrics") route = "/metrics", allowed = "GET";
  else if (path == "/v1/models") route = "/v1/models", allowed = "GET";
  else if (path == "/v1/chat/completions") route = "/v1/chat/completions", allowed = "POST";
  else if (path == "/v1/completions") route = "/v1/completions", allowed = "POST";
  else if (path == "/v1/runs") route = "/v1/runs", allowed = "GET, POST";
  else if (path == "/v1/cache/stats") route = "/v1/cache/stats", allowed = "GET";
  else if (path == "/v1/cache/tree") route = "/v1/cache/tree", allowed = "GET";
  else if (path.rfind("/v1/runs/", 0) == 0) {
    std::string rest = path.substr(9);
    if (rest.size() > 7 && rest.ends_with("/events")) {
      rest.resize(rest.size() - 7);
      events = true;
    }
    if (plausible_id(rest)) {
      run_id = rest;
      route = events ? "/v1/runs/{id}/events" : "/v1/runs/{id}";
      allowed = events ? "GET" : "GET, DELETE";
    }
  }
  if (route.empty()) {
    // Only the path's shape is echoed, bounded, never the query.
    return reply_error(ex, "", "other", not_found("no endpoint at '" + path.substr(0, 200) +
                                                  "'; see GET /v1/models, POST /v1/chat/completions, POST /v1/runs"));
  }
  if (!method_allowed(allowed, req.method)) {
    ApiError e = method_not_allowed(req.method.substr(0, 16), allowed);
    HttpReply r;
    r.status = 405;
    r.body = error_body(e);
    r.headers.emplace_back("Allow", allowed);
    return reply(ex, "", route, std::move(r));
  }
  if (route == "/") {
    HttpReply r;
    r.content_type = "text/html; charset=utf-8";
    r.body = dashboard_html();
    return reply(ex, "", route, std::move(r));
  }
  if (route == "/health") return health(ex);
  const auto principal = authenticate(req);
  if (!principal) {
    return reply_error(ex, "", route,
                       unauthorized(req.authorization.empty()
                                        ? "missing API key; send 'Authorization: Bearer <key>'"
                                        : "unknown API key; check the key (keys are listed in the server config)"));
  }
  const Principal& p = *principal;
  if (route == "/metrics") return prometheus(ex, p);
  if (route == "/v1/models") return models(ex, p);
  if (route == "/v1/chat/completions") return completions(req, ex, p, true);
  if (route == "/v1/completions") return completions(req, ex, p, false);
  if (route == "/v1/runs") return req.method == "POST" ? start_run(req, ex, p) : list_runs(ex, p);
  if (route == "/v1/cache/stats") return cache_stats(ex, p);
  if (route == "/v1/cache/tree") return cache_tree(req, ex, p);
  return run_request(req, ex, p, run_id, events);
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
    nlohmann::ordered_json o;
    o["prompt_tokens"] = f.prompt_tokens;
    o["cached_tokens"] = f.cached_tokens;
    o["computed_tokens"] = f.computed_tokens;
    o["generated_tokens"] = f.generated_tokens;
    o["warmup_tokens"] = f.warmup_tokens;
    o["hit_ratio"] = f.hit_ratio();
    o["generations"] = f.generations;
    o["runs"] = f.runs;
    o["inflight"] = f.inflight;
    served[t] = std::move(o);
  }
  j["served"] = std::move(served);
  if (p.admin) j["server"] = {{"inflight", inflight()}, {"max_inflight", config_.max_inflight}};
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
  reply(ex, p.tenant, "/metrics", std::move(r));
}

}  // namespace arbor::server

#include "runtime/server/metrics.hpp"

#include <cstdio>

namespace arbor::server {
namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

struct Writer {
  std::string out;
  void head(const char* name, const char* type, const char* help) {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  }
  void line(const std::string& name, const std::string& labels, double value) {
    out += name;
    if (!labels.empty()) out += "{" + labels + "}";
    out += " " + num(value) + "\n";
  }
};

std::string tenant_label(const std::string& t) { return "tenant=\"" + escape_label(t) + "\""; }

}  // namespace

std::string escape_label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

void Metrics::count_request(const std::string& tenant, const std::string& route, int status) {
  std::lock_guard lock(mutex_);
  ++tenants_[tenant].requests[{route, status}];
}

void Metrics::observe_ttft(TenantFigures& f, double ms) {
  const double s = ms / 1000.0;
  std::size_t i = 0;
  while (i < kTtftBuckets.size() && s > kTtftBuckets[i]) ++i;
  ++f.ttft_counts[i];
  f.ttft_sum_s += s;
  ++f.ttft_count;
}

void Metrics::record_generation(const std::string& tenant, const GenerateResult& r) {
  std::lock_guard lock(mutex_);
  TenantFigures& f = tenants_[tenant];
  ++f.generations;
  f += r.usage();
  if (r.generated_tokens > 0) observe_ttft(f, r.ttft_ms);
}

void Metrics::record_run(const std::string& tenant, const RunResult& r) {
  std::lock_guard lock(mutex_);
  TenantFigures& f = tenants_[tenant];
  ++f.runs;
  for (const auto& a : r.agents) {
    f += a.usage();
    f.warmup_tokens += a.warmup_tokens;
    if (a.generated_tokens > 0) observe_ttft(f, a.ttft_ms);
  }
}

void Metrics::add_inflight(const std::string& tenant, int delta) {
  std::lock_guard lock(mutex_);
  tenants_[tenant].inflight += delta;
}

int Metrics::inflight(const std::string& tenant) const {
  std::lock_guard lock(mutex_);
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.inflight;
}

std::map<std::string, TenantFigures> Metrics::snapshot() const {
  std::lock_guard lock(mutex_);
  return tenants_;
}

std::string Metrics::render(const CacheStats& cache, int total_inflight,
                            const std::optional<std::string>& only_tenant) const {
  auto figures = snapshot();
  if (only_tenant) {
    auto it = figures.find(*only_tenant);
    TenantFigures mine = it == figures.end() ? TenantFigures{} : it->second;
    figures.clear();
    figures[*only_tenant] = mine;
  }
  Writer w;
  w.head("arbor_requests_total", "counter", "HTTP requests answered, by tenant, route and status code.");
  for (const auto& [t, f] : figures)
    for (const auto& [key, n] : f.requests)
      w.line("arbor_requests_total",
             tenant_label(t) + ",route=\"" + escape_label(key.first) + "\",code=\"" + std::to_string(key.second) + "\"",
             double(n));
  struct Counter {
    const char* name;
    const char* help;
    std::uint64_t TenantFigures::*field;
  };
  const Counter counters[] = {
      {"arbor_generations_total", "Completions generated.", &TenantFigures::generations},
      {"arbor_runs_total", "Workflow runs finished.", &TenantFigures::runs},
      {"arbor_prompt_tokens_total", "Prompt tokens of every request served.", &TenantFigures::prompt_tokens},
      {"arbor_cached_tokens_total", "Prompt tokens read from the KV cache.", &TenantFigures::cached_tokens},
      {"arbor_computed_tokens_total", "Prompt tokens prefilled.", &TenantFigures::computed_tokens},
      {"arbor_generated_tokens_total", "Tokens generated.", &TenantFigures::generated_tokens},
      {"arbor_warmup_tokens_total", "Prefix tokens prefilled by workflow cache warm-ups (not prompt tokens).",
       &TenantFigures::warmup_tokens},
  };
  for (const auto& c : counters) {
    w.head(c.name, "counter", c.help);
    for (const auto& [t, f] : figures) w.line(c.name, tenant_label(t), double(f.*(c.field)));
  }
  w.head("arbor_cache_hit_ratio", "gauge", "Cached prompt tokens / prompt tokens, served by this server.");
  for (const auto& [t, f] : figures) w.line("arbor_cache_hit_ratio", tenant_label(t), hit_ratio(f));
  w.head("arbor_inflight_requests", "gauge", "Generations and runs in flight.");
  for (const auto& [t, f] : figures) w.line("arbor_inflight_requests", tenant_label(t), f.inflight);

  w.head("arbor_time_to_first_token_seconds", "histogram", "Request accepted -> first generated token.");
  for (const auto& [t, f] : figures) {
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i <= kTtftBuckets.size(); ++i) {
      cumulative += f.ttft_counts[i];
      const std::string le = i < kTtftBuckets.size() ? num(kTtftBuckets[i]) : "+Inf";
      w.line("arbor_time_to_first_token_seconds_bucket", tenant_label(t) + ",le=\"" + le + "\"", double(cumulative));
    }
    w.line("arbor_time_to_first_token_seconds_sum", tenant_label(t), f.ttft_sum_s);
    w.line("arbor_time_to_first_token_seconds_count", tenant_label(t), double(f.ttft_count));
  }

  // The cache's own per-tenant figures.
  auto tenant_cache = cache.tenants;
  if (only_tenant) {
    auto it = tenant_cache.find(*only_tenant);
    TenantCacheStats mine = it == tenant_cache.end() ? TenantCacheStats{} : it->second;
    tenant_cache.clear();
    tenant_cache[*only_tenant] = mine;
  }
  w.head("arbor_tenant_pages_used", "gauge", "KV pages held by the tenant's radix tree and sequences.");
  for (const auto& [t, s] : tenant_cache) w.line("arbor_tenant_pages_used", tenant_label(t), double(s.used_pages));
  w.head("arbor_tenant_pages_quota", "gauge", "The tenant's page quota (0 = the pool).");
  for (const auto& [t, s] : tenant_cache) w.line("arbor_tenant_pages_quota", tenant_label(t), double(s.quota_pages));
  w.head("arbor_tenant_cache_lookups_total", "counter", "Prefix lookups in the tenant's tree.");
  for (const auto& [t, s] : tenant_cache) w.line("arbor_tenant_cache_lookups_total", tenant_label(t), double(s.lookups));
  w.head("arbor_tenant_cache_hit_tokens_total", "counter", "Tokens found in the tenant's tree.");
  for (const auto& [t, s] : tenant_cache)
    w.line("arbor_tenant_cache_hit_tokens_total", tenant_label(t), double(s.hit_tokens));
  w.head("arbor_tenant_cache_miss_tokens_total", "counter", "Tokens not found in the tenant's tree.");
  for (const auto& [t, s] : tenant_cache)
    w.line("arbor_tenant_cache_miss_tokens_total", tenant_label(t), double(s.miss_tokens));
  w.head("arbor_tenant_evicted_pages_total", "counter", "Pages evicted from the tenant's tree.");
  for (const auto& [t, s] : tenant_cache)
    w.line("arbor_tenant_evicted_pages_total", tenant_label(t), double(s.evicted_pages));
  if (only_tenant) return w.out;

  w.head("arbor_cache_pages", "gauge", "KV page pool by state.");
  w.line("arbor_cache_pages", "state=\"total\"", cache.pages_total);
  w.line("arbor_cache_pages", "state=\"used\"", cache.pages_used);
  w.line("arbor_cache_pages", "state=\"free\"", cache.pages_free);
  w.line("arbor_cache_pages", "state=\"locked\"", cache.pages_locked);
  w.line("arbor_cache_pages", "state=\"cached_idle\"", cache.pages_cached_idle);
  w.line("arbor_cache_pages", "state=\"pinned\"", cache.pages_pinned);  // a part of locked
  w.head("arbor_cache_evictions_total", "counter", "Pages evicted, all tenants.");
  w.line("arbor_cache_evictions_total", "", double(cache.evictions));
  w.head("arbor_cache_global_hit_ratio", "gauge", "Cached / prompt tokens over the runtime's lifetime.");
  w.line("arbor_cache_global_hit_ratio", "", cache.hit_ratio);
  w.head("arbor_scheduler_steps_total", "counter", "Batched forward steps of the scheduler.");
  w.line("arbor_scheduler_steps_total", "", double(cache.batched_steps));
  w.head("arbor_scheduler_step_seconds_total", "counter", "Wall time of those steps.");
  w.line("arbor_scheduler_step_seconds_total", "", cache.step_seconds);
  w.head("arbor_engine_forward_seconds_total", "counter",
         "The part of the steps' time inside the engine's forward; the rest is host work.");
  w.line("arbor_engine_forward_seconds_total", "", cache.forward_seconds);
  w.head("arbor_engine_graph_steps_total", "counter",
         "Steps a device engine ran as graphs: replayed as captured before, or captured.");
  w.line("arbor_engine_graph_steps_total", "kind=\"replayed\"", double(cache.graph_steps_replayed));
  w.line("arbor_engine_graph_steps_total", "kind=\"captured\"", double(cache.graph_steps_captured));
  w.head("arbor_queue_depth", "gauge", "Admissions waiting in the cache actor's queue.");
  w.line("arbor_queue_depth", "", cache.queued_requests);
  w.head("arbor_live_sequences", "gauge", "Sequences being prefilled or decoded.");
  w.line("arbor_live_sequences", "", cache.live_sequences);
  w.head("arbor_server_inflight", "gauge", "Generations and runs admitted by the server, all tenants.");
  w.line("arbor_server_inflight", "", total_inflight);
  return w.out;
}

}  // namespace arbor::server

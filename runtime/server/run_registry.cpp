#include "runtime/server/run_registry.hpp"

#include <algorithm>

namespace arbor::server {

const char* event_kind_name(Event::Kind kind) {
  switch (kind) {
    case Event::Kind::run_started: return "run_started";
    case Event::Kind::agent_started: return "agent_started";
    case Event::Kind::token: return "token";
    case Event::Kind::agent_finished: return "agent_finished";
    case Event::Kind::run_finished: return "run_finished";
  }
  return "unknown";
}

nlohmann::ordered_json cache_stats_json(const CacheStats& s, const std::string* only_tenant) {
  nlohmann::ordered_json j;
  auto tenant_json = [](const TenantCacheStats& t) {
    nlohmann::ordered_json o;
    o["lookups"] = t.lookups;
    o["hit_tokens"] = t.hit_tokens;
    o["miss_tokens"] = t.miss_tokens;
    o["inserted_tokens"] = t.inserted_tokens;
    o["evicted_pages"] = t.evicted_pages;
    o["used_pages"] = t.used_pages;
    o["quota_pages"] = t.quota_pages;
    o["num_sequences"] = t.num_sequences;
    const auto looked = t.hit_tokens + t.miss_tokens;
    o["hit_ratio"] = looked ? double(t.hit_tokens) / double(looked) : 0.0;
    return o;
  };
  if (!only_tenant) {
    nlohmann::ordered_json g;
    g["prompt_tokens"] = s.prompt_tokens;
    g["cached_tokens"] = s.cached_tokens;
    g["computed_tokens"] = s.computed_tokens;
    g["generated_tokens"] = s.generated_tokens;
    g["hit_ratio"] = s.hit_ratio;
    g["pages_total"] = s.pages_total;
    g["pages_used"] = s.pages_used;
    g["pages_free"] = s.pages_free;
    g["pages_locked"] = s.pages_locked;
    g["pages_cached_idle"] = s.pages_cached_idle;
    g["evictions"] = s.evictions;
    g["live_sequences"] = s.live_sequences;
    g["queued_requests"] = s.queued_requests;
    j["global"] = std::move(g);
  } else {
    j["pool"] = {{"pages_total", s.pages_total}};
  }
  nlohmann::ordered_json tenants = nlohmann::ordered_json::object();
  for (const auto& [name, t] : s.tenants)
    if (!only_tenant || *only_tenant == name) tenants[name] = tenant_json(t);
  if (only_tenant && !tenants.contains(*only_tenant)) tenants[*only_tenant] = tenant_json({});
  j["tenants"] = std::move(tenants);
  return j;
}

void RunEntry::set_control(std::shared_ptr<RunControl> control) {
  std::lock_guard lock(mutex_);
  control_ = std::move(control);
}

std::shared_ptr<RunControl> RunEntry::control() const {
  std::lock_guard lock(mutex_);
  return control_;
}

bool RunEntry::finished() const {
  std::lock_guard lock(mutex_);
  return finished_;
}

std::string RunEntry::frame(const Event& e) {
  nlohmann::ordered_json j;
  j["type"] = event_kind_name(e.kind);
  j["run_id"] = e.run_id;
  if (!e.agent_id.empty()) j["agent_id"] = e.agent_id;
  if (e.kind == Event::Kind::token) {
    auto& joiner = joiners_[e.agent_id];
    j["text"] = joiner.push(e.text);
  } else if (!e.text.empty()) {
    j["text"] = e.text;
  }
  if (!e.status.empty()) j["status"] = e.status;
  if (e.kind == Event::Kind::agent_finished || e.kind == Event::Kind::run_finished)
    j["cache"] = cache_stats_json(e.cache, &tenant_);  // the run's tenant only
  return sse_data(j, event_kind_name(e.kind));
}

bool RunEntry::publish(const Event& event) {
  std::string f;
  bool first_finish = false;
  {
    std::lock_guard lock(mutex_);
    if (finished_) return false;
    f = frame(event);
    if (event.kind == Event::Kind::token && log_.size() >= kMaxLoggedEvents) {
      // Keep the log bounded; live followers still get the token.
    } else {
      log_.push_back(f);
    }
    if (event.kind == Event::Kind::run_finished) {
      finished_ = first_finish = true;
      f += kSseDone;
      log_.emplace_back(kSseDone);
    }
    // Sent under the lock so followers see events in log order (send never blocks).
    for (const auto& ex : followers_) {
      ex->send(f);
      if (first_finish) ex->end();
    }
    if (first_finish) followers_.clear();
  }
  return first_finish;
}

void RunEntry::follow(const std::shared_ptr<Exchange>& exchange) {
  std::string backlog;
  bool done;
  {
    std::lock_guard lock(mutex_);
    for (const auto& f : log_) backlog += f;
    done = finished_;
    if (!done) {
      std::erase_if(followers_, [](const auto& ex) { return ex->abandoned(); });
      followers_.push_back(exchange);
    }
    // Under the lock so no live event can come before the backlog.
    exchange->begin_stream();
    exchange->send(std::move(backlog));
  }
  if (done) exchange->end();
}

void RunRegistry::add(const std::string& id, std::shared_ptr<RunEntry> entry) {
  std::lock_guard lock(mutex_);
  if (runs_.emplace(id, std::move(entry)).second) order_.push_back(id);
  prune();
}

std::shared_ptr<RunEntry> RunRegistry::find(const std::string& id) const {
  std::lock_guard lock(mutex_);
  auto it = runs_.find(id);
  return it == runs_.end() ? nullptr : it->second;
}

std::vector<std::pair<std::string, std::shared_ptr<RunEntry>>> RunRegistry::list(const std::string& tenant) const {
  std::lock_guard lock(mutex_);
  std::vector<std::pair<std::string, std::shared_ptr<RunEntry>>> out;
  for (const auto& id : order_) {
    const auto& e = runs_.at(id);
    if (tenant.empty() || e->tenant() == tenant) out.emplace_back(id, e);
  }
  return out;
}

std::vector<std::shared_ptr<RunEntry>> RunRegistry::all() const {
  std::lock_guard lock(mutex_);
  std::vector<std::shared_ptr<RunEntry>> out;
  for (const auto& [id, e] : runs_) out.push_back(e);
  return out;
}

void RunRegistry::prune() {
  std::size_t num_finished = 0;
  for (const auto& id : order_) num_finished += runs_.at(id)->finished();
  for (auto it = order_.begin(); num_finished > max_finished_ && it != order_.end();) {
    if (runs_.at(*it)->finished()) {
      runs_.erase(*it);
      it = order_.erase(it);
      --num_finished;
    } else {
      ++it;
    }
  }
}

}  // namespace arbor::server

#include "runtime/server/run_registry.hpp"

#include <algorithm>

namespace arbor::server {

// The runtime's CacheStats document (to_json), reshaped for the API: "global" for an
// admin, only the pool size otherwise, and the tenants the caller may see, each with
// its own hit ratio.
nlohmann::ordered_json cache_stats_json(const CacheStats& s, const std::string* only_tenant) {
  nlohmann::ordered_json all = nlohmann::ordered_json::parse(to_json(s));
  nlohmann::ordered_json tenants = nlohmann::ordered_json::object();
  for (auto& [name, t] : all["tenants"].items()) {
    if (only_tenant && *only_tenant != name) continue;
    const auto hits = t["hit_tokens"].get<double>(), looked = hits + t["miss_tokens"].get<double>();
    t["hit_ratio"] = looked > 0 ? hits / looked : 0.0;
    tenants[name] = t;
  }
  if (only_tenant && !tenants.contains(*only_tenant)) {
    CacheStats none;
    none.tenants[*only_tenant] = {};
    nlohmann::ordered_json empty = nlohmann::ordered_json::parse(to_json(none));
    tenants[*only_tenant] = empty["tenants"][*only_tenant];
    tenants[*only_tenant]["hit_ratio"] = 0.0;
  }
  all.erase("tenants");
  nlohmann::ordered_json j;
  if (only_tenant) j["pool"] = {{"pages_total", s.pages_total}};
  else j["global"] = std::move(all);
  j["tenants"] = std::move(tenants);
  return j;
}

void RunEntry::set_control(std::shared_ptr<RunControl> control) {
  std::lock_guard lock(mutex_);
  control_ = std::move(control);
}

void RunEntry::hold_slot(AdmissionSlot slot) {
  std::lock_guard lock(mutex_);
  slot_ = std::move(slot);
}

AdmissionSlot RunEntry::take_slot() {
  std::lock_guard lock(mutex_);
  return std::move(slot_);
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
  nlohmann::ordered_json j = event_json(e);  // text is valid UTF-8 (Backend)
  if (e.kind == Event::Kind::agent_finished || e.kind == Event::Kind::run_finished)
    j["cache"] = cache_stats_json(e.cache, &tenant_);  // the run's tenant only
  return sse_data(j, to_string(e.kind));
}

bool RunEntry::publish(const Event& event) {
  std::string f;
  bool first_finish = false;
  {
    std::lock_guard lock(mutex_);
    if (finished_) return false;
    f = frame(event);
    const bool token = event.kind == Event::Kind::token;
    if (!token || log_.size() < kMaxLoggedEvents) {  // keep the log bounded; followers still get tokens
      log_bytes_ += f.size();
      log_.push_back({token, f});
    }
    if (event.kind == Event::Kind::run_finished) {
      finished_ = first_finish = true;
      f += kSseDone;
      log_.push_back({false, std::string(kSseDone)});
      drop_token_frames();  // a finished run replays its lifecycle; the outputs are in agent_finished
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
    backlog.reserve(log_bytes_);
    for (const auto& f : log_) backlog += f.sse;
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

void RunEntry::drop_token_frames() {
  std::erase_if(log_, [](const Frame& f) { return f.token; });
  log_.shrink_to_fit();
  log_bytes_ = 0;
  for (const auto& f : log_) log_bytes_ += f.sse.size();
}

void RunEntry::retire(std::string document, RunStatus status) {
  std::shared_ptr<RunControl> control;  // released outside the lock
  std::lock_guard lock(mutex_);
  document_ = std::move(document);
  status_ = status;
  control = std::move(control_);
}

std::optional<std::string> RunEntry::document() const {
  std::lock_guard lock(mutex_);
  return document_;
}

std::optional<RunStatus> RunEntry::retired_status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

std::size_t RunEntry::retained_bytes() const {
  std::lock_guard lock(mutex_);
  return log_bytes_ + (document_ ? document_->size() : 0);
}

void RunRegistry::add(const std::string& id, std::shared_ptr<RunEntry> entry) {
  std::lock_guard lock(mutex_);
  if (runs_.emplace(id, std::move(entry)).second) order_.push_back(id);
  prune();
}

void RunRegistry::trim() {
  std::lock_guard lock(mutex_);
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

std::size_t RunRegistry::num_finished() const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [id, e] : runs_) n += e->finished();
  return n;
}

std::size_t RunRegistry::finished_bytes() const {
  std::lock_guard lock(mutex_);
  std::size_t bytes = 0;
  for (const auto& [id, e] : runs_)
    if (e->finished()) bytes += e->retained_bytes();
  return bytes;
}

std::size_t RunRegistry::size() const {
  std::lock_guard lock(mutex_);
  return runs_.size();
}

void RunRegistry::prune() {
  struct Finished {
    std::string id;
    std::size_t bytes;
  };
  std::vector<Finished> finished;  // oldest first
  std::size_t bytes = 0;
  for (const auto& id : order_) {
    const auto& e = runs_.at(id);
    if (!e->finished()) continue;
    finished.push_back({id, e->retained_bytes()});
    bytes += finished.back().bytes;
  }
  std::size_t dropped = 0;  // the newest finished run stays, whatever its size
  while (dropped + 1 < finished.size() && (finished.size() - dropped > max_finished_ || bytes > max_bytes_)) {
    bytes -= finished[dropped].bytes;
    runs_.erase(finished[dropped].id);
    ++dropped;
  }
  if (dropped > 0) std::erase_if(order_, [&](const std::string& id) { return !runs_.contains(id); });
}

}  // namespace arbor::server

#include "runtime/cli/progress.hpp"

#include <algorithm>
#include <cstdio>

namespace arbor::cli {

RateMeter::RateMeter(ProgressClock::time_point start, ProgressClock::duration window)
    : start_(start), window_(window) {}

void RateMeter::drop_before(ProgressClock::time_point t) {
  while (!events_.empty() && events_.front().first <= t) {
    in_window_ -= events_.front().second;
    events_.pop_front();
  }
}

void RateMeter::add(ProgressClock::time_point t, std::size_t count) {
  events_.emplace_back(t, count);
  in_window_ += count;
  drop_before(t - window_);
}

double RateMeter::rate(ProgressClock::time_point now) {
  drop_before(now - window_);
  const auto span = std::min(window_, now - start_);
  const double seconds = std::chrono::duration<double>(span).count();
  return seconds > 0 ? double(in_window_) / seconds : 0.0;
}

std::string format_progress(const ProgressCounts& c) {
  const std::size_t finished = c.running + c.done + c.failed;
  const std::size_t waiting = c.total > finished ? c.total - finished : 0;
  char line[256];
  std::snprintf(line, sizeof line,
                "[arbor] agents %zu: %zu running, %zu done, %zu failed, %zu waiting | %.1f tokens/s | cache hit %.0f%%",
                c.total, c.running, c.done, c.failed, waiting, c.tokens_per_s, 100.0 * c.hit_ratio);
  if (c.tool_calls == 0) return line;
  char tools[96];
  std::snprintf(tools, sizeof tools, " | tools %zu call%s, %zu running", c.tool_calls, c.tool_calls == 1 ? "" : "s",
                c.tools_running);
  return std::string(line) + tools;
}

ProgressTracker::ProgressTracker(ProgressClock::time_point start, ProgressClock::duration window)
    : tokens_(start, window) {}

void ProgressTracker::add_agents(std::size_t num_agents) {
  std::lock_guard lock(mu_);
  counts_.total += num_agents;
}

void ProgressTracker::add_agents(const std::string& run_id, const std::vector<std::string>& ids) {
  std::lock_guard lock(mu_);
  runs_by_id_.insert(run_id);
  for (const auto& id : ids)
    if (known_.insert({run_id, id}).second) ++counts_.total;
}

void ProgressTracker::count_new_agent(const Event& e) {
  if (runs_by_id_.contains(e.run_id) && known_.insert({e.run_id, e.agent_id}).second) ++counts_.total;
}

void ProgressTracker::on_event(const Event& e, ProgressClock::time_point now) {
  std::lock_guard lock(mu_);
  switch (e.kind) {
    case Event::Kind::agent_started:
      count_new_agent(e);
      running_.insert({e.run_id, e.agent_id});
      break;
    case Event::Kind::agent_finished:
      count_new_agent(e);
      running_.erase({e.run_id, e.agent_id});
      ++(e.status == EventStatus(AgentStatus::ok) ? counts_.done : counts_.failed);
      counts_.hit_ratio = e.cache.hit_ratio;
      break;
    case Event::Kind::token:
      tokens_.add(now);
      break;
    case Event::Kind::tool_call:
      ++counts_.tool_calls;
      ++counts_.tools_running;
      break;
    case Event::Kind::tool_result:
      if (counts_.tools_running > 0) --counts_.tools_running;
      break;
    default:
      break;
  }
}

ProgressCounts ProgressTracker::counts(ProgressClock::time_point now) {
  std::lock_guard lock(mu_);
  ProgressCounts c = counts_;
  c.running = running_.size();
  c.tokens_per_s = tokens_.rate(now);
  return c;
}

}  // namespace arbor::cli

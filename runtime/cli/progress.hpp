// The live progress line of `arbor run`: agents (total, running, done, failed,
// waiting), the current generation rate, the cache hit ratio. The line's text and its
// counts are plain functions of the events and clock readings fed in, so they can be
// tested without a terminal.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <mutex>
#include <set>
#include <vector>
#include <string>
#include <utility>

#include <arbor/runtime.hpp>

namespace arbor::cli {

using ProgressClock = std::chrono::steady_clock;

// Events per second over the last `window`: the count in (now - window, now] divided
// by the window, or by the time since `start` while that is shorter. Not thread-safe.
class RateMeter {
 public:
  RateMeter(ProgressClock::time_point start, ProgressClock::duration window);
  void add(ProgressClock::time_point t, std::size_t count = 1);
  double rate(ProgressClock::time_point now);

 private:
  void drop_before(ProgressClock::time_point t);
  ProgressClock::time_point start_;
  ProgressClock::duration window_;
  std::deque<std::pair<ProgressClock::time_point, std::size_t>> events_;  // in time order
  std::size_t in_window_ = 0;
};

struct ProgressCounts {
  std::size_t total = 0;    // agents of every run started
  std::size_t running = 0;
  std::size_t done = 0;     // finished ok
  std::size_t failed = 0;   // finished otherwise (failed, timed out, cancelled)
  double tokens_per_s = 0;  // generated, current (RateMeter over the last second)
  double hit_ratio = 0;     // of the cache, at the last agent that finished
  std::size_t tool_calls = 0;     // calls made (tool_call events)
  std::size_t tools_running = 0;  // calls whose result has not come back yet
};

// "[arbor] agents 12: 3 running, 7 done, 1 failed, 1 waiting | 35.2 tokens/s | cache hit 64%",
// then, once a tool was called, " | tools 5 calls, 1 running"
std::string format_progress(const ProgressCounts& counts);

// Folds run events into ProgressCounts. Thread-safe (events arrive on runtime threads).
class ProgressTracker {
 public:
  explicit ProgressTracker(ProgressClock::time_point start,
                           ProgressClock::duration window = std::chrono::seconds(1));
  void add_agents(std::size_t num_agents);  // the agents of a run that started
  // The same, by id: an agent of this run that is not among `ids` (an instance of a
  // fan-out decided at run time, for_each.output) joins the total when it first appears.
  void add_agents(const std::string& run_id, const std::vector<std::string>& ids);
  void on_event(const Event& event, ProgressClock::time_point now);
  ProgressCounts counts(ProgressClock::time_point now);

 private:
  std::mutex mu_;
  RateMeter tokens_;
  ProgressCounts counts_;
  std::set<std::pair<std::string, std::string>> running_;  // (run id, agent id)
  std::set<std::string> runs_by_id_;                        // runs added with their ids
  std::set<std::pair<std::string, std::string>> known_;     // (run id, agent id) counted in total
  void count_new_agent(const Event& e);
};

}  // namespace arbor::cli

// Server-side counters per tenant (requests, tokens, time to first token) and the
// Prometheus text exposition (version 0.0.4) of them plus the runtime's CacheStats.
// Thread-safe; every call takes one mutex for O(tenants) work.
#pragma once

#include <array>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "arbor/runtime.hpp"

namespace arbor::server {

// Upper bounds (seconds) of the time-to-first-token histogram buckets; +Inf implied.
inline constexpr std::array<double, 11> kTtftBuckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                        1.0,  2.5,   5.0,  10.0, 30.0};

// Its TokenUsage sums the tenant's generations and runs' agents.
struct TenantFigures : TokenUsage {
  std::map<std::pair<std::string, int>, std::uint64_t> requests;  // (route, status) -> count
  std::uint64_t warmup_tokens = 0;  // prefilled by runs' cache warm-ups, not prompt tokens
  std::uint64_t generations = 0, runs = 0;
  std::array<std::uint64_t, kTtftBuckets.size() + 1> ttft_counts{};  // per bucket, last = +Inf
  double ttft_sum_s = 0;
  std::uint64_t ttft_count = 0;
  int inflight = 0;
};

class Metrics {
 public:
  void count_request(const std::string& tenant, const std::string& route, int status);
  void record_generation(const std::string& tenant, const GenerateResult& result);
  void record_run(const std::string& tenant, const RunResult& result);
  void add_inflight(const std::string& tenant, int delta);
  int inflight(const std::string& tenant) const;

  std::map<std::string, TenantFigures> snapshot() const;

  // `only_tenant` set: that tenant's series only, no pool-wide ones.
  std::string render(const CacheStats& cache, int total_inflight, const std::optional<std::string>& only_tenant) const;

 private:
  void observe_ttft(TenantFigures& f, double ms);

  mutable std::mutex mutex_;
  std::map<std::string, TenantFigures> tenants_;
};

// Escapes a Prometheus label value (backslash, quote, newline).
std::string escape_label(const std::string& value);

}  // namespace arbor::server

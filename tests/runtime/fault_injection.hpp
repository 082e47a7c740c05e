// Test-only access to the runtime's fault injection (actors/run_env.hpp FaultInjection):
// a named agent instance ("researcher[2]") fails its first K attempts at once
// ("injected fault"), or never answers on them and so ends by its timeout_ms. Not part
// of the public API: a user's runtime never misbehaves on purpose. Also: killing the
// cache actor, and the count of cache_stats() calls it did not answer.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "arbor/runtime.hpp"
#include "runtime/runtime_impl.hpp"

namespace arbor {

struct RuntimeTestAccess {
  // Applies to the runs started after the call.
  static void inject_faults(Runtime& runtime, std::map<std::string, int> fail_attempts,
                            std::map<std::string, int> hang_attempts = {}) {
    runtime.impl_->faults.fail_attempts = std::move(fail_attempts);
    runtime.impl_->faults.hang_attempts = std::move(hang_attempts);
  }
  // Kills the runtime's cache actor (as a crash would): every later request to it fails.
  static void kill_cache_actor(Runtime& runtime) {
    caf::anon_send_exit(runtime.impl_->cache, caf::exit_reason::kill);
  }
  static std::uint64_t cache_stats_failures(const Runtime& runtime) { return runtime.impl_->cache_stats_failures; }
};

}  // namespace arbor

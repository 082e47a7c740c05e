// Test-only access to the runtime's fault injection (actors/run_env.hpp FaultInjection):
// a named agent instance ("researcher[2]") fails its first K attempts at once
// ("injected fault"), or never answers on them and so ends by its timeout_ms. Not part
// of the public API: a user's runtime never misbehaves on purpose.
#pragma once

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
};

}  // namespace arbor

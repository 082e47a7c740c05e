// Fuzzes the `arbor serve --config` parser: any text gives a config or an error naming
// what is wrong; nothing throws. An accepted config respects its documented limits.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.hpp"
#include "runtime/server/server_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace arbor::server;
  auto config = parse_server_config(std::string(reinterpret_cast<const char*>(data), size));
  if (!config) {
    ARBOR_FUZZ_CHECK(!config.error().message.empty(), "an error without a message");
    return 0;
  }
  ARBOR_FUZZ_CHECK(config->port >= 0 && config->port <= 65535, std::to_string(config->port));
  ARBOR_FUZZ_CHECK(config->max_body_bytes >= 64 && config->max_inflight >= 1 && config->max_tokens >= 1 &&
                       config->io_threads >= 1 && config->max_runs >= 1,
                   "a limit below its minimum");
  ARBOR_FUZZ_CHECK(config->auth == (!config->keys.empty() || !config->admin_key.empty()), "auth");
  for (const auto& [key, tenant] : config->keys)
    ARBOR_FUZZ_CHECK(key.size() >= 8 && !tenant.empty() && key != config->admin_key, tenant);
  return 0;
}

// The runtime's settings (RuntimeConfig) and their one parser and checker. Every front
// end uses these: Runtime::create checks a config with check_config, the server's
// config file (runtime/server/server_config.cpp) and the CLI's flags
// (runtime/cli/runtime_options.cpp) take their ranges from `limits` and their names
// from parse_device_choice / parse_eviction / parse_precision, so a limit or a name is
// written once.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace arbor {

// Where the forward pass runs: the CPU, a CUDA device (a build with -DARBOR_CUDA=ON and
// a CUDA device; Runtime::create fails otherwise, saying which is missing), or
// automatic (cuda when both are there, else cpu). Runtime::device() says what was used.
enum class DeviceChoice { automatic, cpu, cuda };

// Which cached pages go first when the pool is full.
enum class Eviction {
  lru,       // least recently used
  lfu,       // least frequently used
  workflow,  // keeps the prefixes that pending agents will read (priority by pending readers)
};

// Activations in the CPU engine's int8 matmuls: accurate (two 8-bit terms; matches a
// float64 reference to ~0.01 logits) or fast (one term, llama.cpp's numerics; ~2x
// faster prefill, ~0.2 logits of drift that can flip near-tied greedy choices).
enum class Precision { accurate, fast };

// The names the CLI and config files use ("auto", "lru", "fast"), and back. An unknown
// name is invalid_argument: "must be lru, lfu or workflow (got 'random')" (the caller
// puts where in front). parse_eviction also takes "priority", the cache layer's name.
const char* to_string(DeviceChoice device);
const char* to_string(Eviction eviction);
const char* to_string(Precision precision);
Result<DeviceChoice> parse_device_choice(std::string_view name);
Result<Eviction> parse_eviction(std::string_view name);
Result<Precision> parse_precision(std::string_view name);
std::vector<std::string> device_names();     // cpu, cuda, auto
std::vector<std::string> eviction_names();   // lru, lfu, workflow
std::vector<std::string> precision_names();  // accurate, fast

// An integer setting's range, both ends included.
struct SettingRange {
  long long min = 0, max = 0;
};

namespace limits {
inline constexpr SettingRange page_size{1, 1024};
inline constexpr SettingRange num_threads{0, 4096};
inline constexpr SettingRange kv_memory_mb{0, 1 << 20};
inline constexpr SettingRange prefill_chunk{1, 1 << 20};
inline constexpr SettingRange max_step_tokens{1, 1 << 20};
inline constexpr SettingRange max_pinned_pages{0, 1LL << 40};
inline constexpr SettingRange max_queued_requests{1, 1 << 20};
inline constexpr SettingRange quota_pages{0, 1LL << 40};
inline constexpr SettingRange tool_pin_ttl_ms{0, 3600000};
}  // namespace limits

struct TenantOptions {
  std::size_t quota_pages = 0;  // 0 = no quota beyond the pool
  bool read_shared = false;     // may read prefixes published to the shared namespace
};

struct RuntimeConfig {
  std::string model_path;            // GGUF file; empty = the default model under models/
  DeviceChoice device = DeviceChoice::automatic;  // where the forward pass runs
  int num_threads = 0;               // CPU engine threads; 0 = all hardware threads
  // KV page pool size in MiB; 0 = automatic: 256 MiB of host memory on the CPU; on a
  // GPU, 90% of the device memory left free once the weights are loaded and the
  // workspace of a max_step_tokens step is set aside. Runtime::kv_pool_bytes() says
  // what was taken.
  std::size_t kv_memory_mb = 0;
  int page_size = 16;                // tokens per page
  Eviction eviction = Eviction::lru;
  bool prefix_caching = true;        // false = compute every prompt in full (baseline)
  // On an asynchronous engine (a GPU), step N+1 is scheduled and queued while step N
  // runs, greedy rows fed N's argmax on the device (SGLang's overlap scheduler); false =
  // each step waits for the one before. Host engines run each step inside the call, so
  // overlap changes nothing there and stays off.
  bool overlap = true;
  Precision precision = Precision::accurate;
  int prefill_chunk = 256;           // max prompt tokens of one sequence per engine step
  int max_step_tokens = 1024;        // token budget of one engine step (decode + prefill)
  std::size_t max_pinned_pages = 0;  // cap on pages pinned for pending agents; 0 = half the pool
  // While an agent's tool runs, its cached history (prompt + generation so far) stays
  // pinned this long, so other agents' memory pressure does not evict it and the turn
  // continues without recomputing it; then it is an ordinary cached page again. 0 = off.
  // Pins never block the pool: they share max_pinned_pages, and when a request can be
  // admitted no other way they are broken, oldest first (actors/batch_engine.hpp).
  int tool_pin_ttl_ms = 30000;
  // Per tenant: generate() requests waiting for admission beyond this are refused
  // (out_of_memory). A workflow run keeps at most this many of its requests at the
  // scheduler; its other agents wait in the run (so a run never overflows a queue).
  // Tenants are admitted in turn (round-robin), whatever their queue lengths.
  std::size_t max_queued_requests = 256;
  std::map<std::string, TenantOptions> tenants;  // unknown tenants get defaults on first use
};

// Every setting of `config` in its range (limits above); else invalid_argument naming
// the first one that is not: "page_size must be in 1..1024 (got 0)". Runtime::create
// calls it.
Result<void> check_config(const RuntimeConfig& config);

}  // namespace arbor

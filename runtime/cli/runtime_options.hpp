// The runtime flags shared by run, generate, serve and the benchmarks (--model,
// --device, --threads, --kv-mem, --page-size, --eviction, --no-cache, --precision,
// --tool-pin-ttl, --no-overlap): declared here once, with RuntimeConfig's defaults in the generated help.
#pragma once

#include <map>
#include <string>

#include <CLI/CLI.hpp>
#include <arbor/runtime.hpp>

namespace arbor::cli {

enum RuntimeFlag : unsigned {
  kModelFlag = 1u << 0,
  kThreadsFlag = 1u << 1,
  kKvMemFlag = 1u << 2,
  kPageSizeFlag = 1u << 3,
  kEvictionFlag = 1u << 4,
  kNoCacheFlag = 1u << 5,
  kPrecisionFlag = 1u << 6,
  kDeviceFlag = 1u << 7,
  kToolPinTtlFlag = 1u << 8,
  kNoOverlapFlag = 1u << 9,
  kAllRuntimeFlags = (1u << 10) - 1,
};

class RuntimeOptions {
 public:
  // Declares the flags of `flags` (a RuntimeFlag mask) on `app`. The object must
  // outlive the parse (CLI11 writes into it).
  void declare(CLI::App& app, unsigned flags = kAllRuntimeFlags);
  // Overrides the fields of `config` whose flags were given (the rest keep their
  // values: defaults, or a config file's); an empty model path becomes the default
  // model.
  void apply(RuntimeConfig& config) const;
  bool given(RuntimeFlag flag) const;
  // The values as given, or RuntimeConfig's defaults.
  const RuntimeConfig& values() const { return values_; }

 private:
  RuntimeConfig values_;
  std::string device_ = to_string(values_.device);  // the names as given; apply() parses them
  std::string eviction_ = to_string(values_.eviction);
  std::string precision_ = to_string(values_.precision);
  bool no_cache_ = false, no_overlap_ = false;
  std::map<RuntimeFlag, CLI::Option*> options_;
};

// The info line of run, generate and serve on stderr: which device computes, and why
// ("arbor run: device cpu (AVX-512, 2 threads), auto: this build has no CUDA backend ...").
void print_device_line(const std::string& command, const Runtime& runtime);

// A runtime message worded for the command line: configuration names that have a
// flag ("kv_memory_mb") become the flag ("--kv-mem"), and so do the names in `extra`
// (e.g. {"max_tokens", "--max-tokens"} for generate). Whole words only.
std::string cli_wording(std::string message, const std::map<std::string, std::string>& extra = {});

}  // namespace arbor::cli

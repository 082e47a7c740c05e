// Options every runtime-backed command shares: --model, --threads, --kv-mem,
// --page-size, --eviction, --no-cache.
#pragma once

#include <string>
#include <vector>

#include <arbor/runtime.hpp>

#include "runtime/cli/command.hpp"

namespace arbor::cli {

// The option names runtime_config_from() reads.
const std::vector<std::string>& runtime_option_names();
// Overrides the fields of `config` whose options are given (the rest keep their
// values: defaults, or a config file's); an empty model path becomes the default
// model. On a bad value returns false with *error set.
bool runtime_config_from(const Args& args, RuntimeConfig& config, std::string* error);

}  // namespace arbor::cli

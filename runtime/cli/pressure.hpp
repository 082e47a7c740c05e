// Cache pressure for `arbor bench tools` and tests/runtime/tool_pin_test.cpp: generations
// of distinct prompts (nothing shared between them, so each fills fresh pages) that push
// the least recently used pages out of a small KV pool while an agent's tool runs.
#pragma once

#include <string>

#include <arbor/runtime.hpp>

namespace arbor::cli {

// The n-th pressure generation in `tenant`: a raw prompt of about 200 tokens that no
// other n shares, one token generated.
GenerateRequest pressure_request(const std::string& tenant, int n);

}  // namespace arbor::cli

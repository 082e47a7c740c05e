// How a request samples its tokens, defined once for every layer: a workflow agent's
// "generation" (workflows::AgentPlan::generation), the embedding API's GenerateRequest::sampling (arbor::SamplingOptions is
// this type), the cache actor's SeqRequest::sampling (CAF inspect in
// actors/messages.hpp), and the model's Sampler and StopChecker, which read it
// directly. A new setting is a member here plus its name in that inspect (and its
// range, if any, in sampling_limits and sampling_errors below).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace arbor {

struct SamplingSettings {
  // Tokens to generate at most. 0 = prefill only: compute and cache the prompt,
  // generate nothing (cache warming).
  int max_tokens = 128;
  double temperature = 0.0;  // <= 0: greedy
  double top_p = 1.0;        // >= 1: off
  int top_k = 0;             // 0: off (1: greedy)
  std::uint64_t seed = 0;    // the sampler's RNG seed (same seed + same logits -> same tokens)
  // Generation stops after any of these strings (the text is cut where it starts);
  // empty strings are ignored; not applied under a JSON Schema (the document decides).
  std::vector<std::string> stop = {};
};

// The one set of bounds for SamplingSettings, checked by check_sampling for every front
// end: the workflow parser (located at the field's JSON pointer), the server (400 with
// "param"), the CLI (its flag validators) and Runtime::generate/start_generate. Chosen as
// the union of what the front ends accepted before they shared it (issue 13), so that
// no value valid in one front end is refused by another: max_tokens 0..2^20 (the CLI's;
// 0 = prefill only), temperature 0..100 (the CLI's), top_p 0..1 (the CLI's; 0 keeps
// the most likely token), top_k 0..2^20 (the workflow's and CLI's). The server still caps
// max_tokens by its own --max-tokens setting (a deployment limit, not a sampling range).
namespace sampling_limits {
inline constexpr int max_tokens_max = 1 << 20;  // min 0
inline constexpr double temperature_max = 100.0;  // min 0
inline constexpr double top_p_max = 1.0;          // min 0
inline constexpr int top_k_max = 1 << 20;         // min 0
}  // namespace sampling_limits

// One out-of-range field: its name as in SamplingSettings and the JSON front ends, and
// "<field> must be in <range> (got <value>)".
struct SamplingFieldError {
  std::string_view field;
  std::string message;
};

// Every out-of-range field of `s`, in declaration order (empty: all in range).
inline std::vector<SamplingFieldError> sampling_errors(const SamplingSettings& s) {
  namespace L = sampling_limits;
  auto num = [](double x) {  // 2.5 -> "2.5", 100 -> "100"
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", x);
    return std::string(buf);
  };
  auto range = [](std::string_view field, const std::string& hi, const std::string& got, const char* note = "") {
    return std::string(field) + " must be in 0.." + hi + " (got " + got + note + ")";
  };
  std::vector<SamplingFieldError> out;
  if (s.max_tokens < 0 || s.max_tokens > L::max_tokens_max)
    out.push_back({"max_tokens", range("max_tokens", std::to_string(L::max_tokens_max), std::to_string(s.max_tokens))});
  if (!(s.temperature >= 0 && s.temperature <= L::temperature_max))  // NaN fails too
    out.push_back({"temperature", range("temperature", num(L::temperature_max), num(s.temperature))});
  if (!(s.top_p >= 0 && s.top_p <= L::top_p_max))
    out.push_back({"top_p", range("top_p", num(L::top_p_max), num(s.top_p))});
  if (s.top_k < 0 || s.top_k > L::top_k_max)
    out.push_back({"top_k", range("top_k", std::to_string(L::top_k_max), std::to_string(s.top_k), "; 0 = off")});
  return out;
}

// invalid_argument with the first out-of-range field's message; the caller prefixes
// where ("generate: ", a flag, a JSON pointer).
inline Result<void> check_sampling(const SamplingSettings& s) {
  auto errors = sampling_errors(s);
  if (errors.empty()) return {};
  return fail(ErrorCode::invalid_argument, std::move(errors.front().message));
}

}  // namespace arbor

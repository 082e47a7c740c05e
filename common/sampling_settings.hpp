// How a request samples its tokens, defined once for every layer: a workflow agent's
// "generation" (workflows::AgentPlan::generation, bounds checked by the workflow
// parser), the embedding API's GenerateRequest::sampling (arbor::SamplingOptions is
// this type), the cache actor's SeqRequest::sampling (CAF inspect in
// actors/messages.hpp), and the model's Sampler and StopChecker, which read it
// directly. A new setting is a member here plus its name in that inspect.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace arbor

// Token counts of served requests, defined once for every layer: one request's
// (actors::SeqResult, GenerateResult), an agent's turns summed (actors::AgentReport,
// AgentResult), a tenant's or the whole cache's since start (the server's TenantFigures,
// CacheStats). Each of those derives from TokenUsage, so the counts are read as
// `r.prompt_tokens` everywhere, added with `+=`, written with the to_json below and read
// with its from_json. The JSON names are the member names, in this order.
#pragma once

#include <concepts>
#include <cstdint>

namespace arbor {

struct TokenUsage {
  std::uint64_t prompt_tokens = 0;    // = cached_tokens + computed_tokens
  std::uint64_t cached_tokens = 0;    // prompt tokens whose K/V came from the cache
  std::uint64_t computed_tokens = 0;  // prompt tokens prefilled
  std::uint64_t generated_tokens = 0;

  // The counts alone, for a struct that derives from TokenUsage.
  TokenUsage& usage() { return *this; }
  const TokenUsage& usage() const { return *this; }

  TokenUsage& operator+=(const TokenUsage& other) {
    prompt_tokens += other.prompt_tokens;
    cached_tokens += other.cached_tokens;
    computed_tokens += other.computed_tokens;
    generated_tokens += other.generated_tokens;
    return *this;
  }
};

// cached / prompt; 0 without prompt tokens.
inline double hit_ratio(const TokenUsage& u) {
  return u.prompt_tokens == 0 ? 0.0 : double(u.cached_tokens) / double(u.prompt_tokens);
}

// For nlohmann::json and ordered_json alike. Only TokenUsage itself (pass `x.usage()`):
// a derived struct is never written as its counts alone by accident.
template <class Json, std::same_as<TokenUsage> T>
void to_json(Json& j, const T& u) {
  j["prompt_tokens"] = u.prompt_tokens;
  j["cached_tokens"] = u.cached_tokens;
  j["computed_tokens"] = u.computed_tokens;
  j["generated_tokens"] = u.generated_tokens;
}

// The counts back from a document to_json wrote (or one that holds its four keys among
// others); a missing key throws Json's out_of_range, as at() does.
template <class Json, std::same_as<TokenUsage> T>
void from_json(const Json& j, T& u) {
  u.prompt_tokens = j.at("prompt_tokens");
  u.cached_tokens = j.at("cached_tokens");
  u.computed_tokens = j.at("computed_tokens");
  u.generated_tokens = j.at("generated_tokens");
}

}  // namespace arbor

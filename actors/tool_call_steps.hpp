// The steps of one tool call in the Hermes format (model/tool_format.hpp), shared by the
// workflow agents' ToolLoop and Runtime::start_generate's tools (OpenAI "tools"):
//   1. a free request with "<tool_call>" as a stop string; when it fires,
//      find_call_head() gives the reply up to the end of the tag and its newline
//      (model::kToolCallHead), as ids (a forced call: forced_call_head());
//   2. the call: call_request(), whose prompt is the first one's plus those ids, under
//      the call's JSON Schema (no stop strings);
//   3. "\n</tool_call>" (call_tail_ids) closes the reply.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "model/tokenizer.hpp"

namespace arbor::actors {

struct CallHead {
  std::vector<std::int32_t> ids;  // the reply up to the end of "<tool_call>\n"
  std::string text;               // its bytes
  // Generated ids whose K/V the request computed before the tag: every id before the
  // one that completed it (the last sampled id is never fed back).
  std::size_t computed = 0;
};

// The head of a call when `r` (a free request with "<tool_call>" among its stop strings)
// stopped at the tag; nullopt when it ended otherwise (an answer). Whole generated ids
// while they fit, then the tag's rest as plain text: an id that ran past the tag is
// not kept.
std::optional<CallHead> find_call_head(const model::Tokenizer& tokenizer, const SeqResult& r);

// The head of a call that starts the reply (tool_choice required).
CallHead forced_call_head(const model::Tokenizer& tokenizer);

// The ids of "\n</tool_call>", which close a call.
std::vector<std::int32_t> call_tail_ids(const model::Tokenizer& tokenizer);

// The ids of `text` without control tokens ("<tool_call>" as the model would write it).
std::vector<std::int32_t> plain_ids(const model::Tokenizer& tokenizer, std::string_view text);

// The call's request: `base` (its sampler settings, tenant, run) with `prompt` + the
// head's ids, the call's JSON Schema, no stop strings, at most `max_tokens`.
SeqRequest call_request(SeqRequest base, const std::vector<std::int32_t>& prompt,
                        const std::vector<std::int32_t>& head_ids, const std::string& call_schema, int max_tokens);

}  // namespace arbor::actors

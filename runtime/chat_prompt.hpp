// What a generate() request's messages and tools become for the chat template
// (runtime/generation.cpp tokenizes it). Internal to the runtime.
//   - tools: one system block (model::tools_system_text) right after the request's
//     leading system message; with none, after the template's default system message
//     (put in explicitly), so the system block's ids and KV pages are those of the same
//     conversation without tools.
//   - an assistant message's tool_calls: its content, then each call as the model writes
//     it (model::tool_call_text), so a conversation sent back matches the cached reply.
//   - "tool" messages: <tool_response> blocks (model::tool_response_text) in one user
//     message per run of consecutive tool messages, as the workflow agents' ToolLoop
//     gives results back.
#pragma once

#include <string>
#include <vector>

#include "arbor/runtime.hpp"
#include "common/result.hpp"
#include "model/chat_template.hpp"
#include "model/tokenizer.hpp"
#include "model/tool_format.hpp"

namespace arbor {

// The request's tools as signatures, checked: names (1..64 letters, digits, '_', '-';
// distinct), parameters (a JSON Schema of an object the engine can enforce), the
// tool_choice (required/function need tools; function names one of them) and what
// tools do not combine with (raw_prompt, json_schema). invalid_argument says which.
Result<std::vector<model::ToolSignature>> request_tools(const GenerateRequest& request);

// The messages to render; `tools_text` ("" = none) is the tools' system block.
std::vector<model::ChatMessage> chat_messages(const GenerateRequest& request, const model::ChatTemplate& chat,
                                              const std::string& tools_text);

// The prompt's token ids as the engine gets them: a raw prompt (BOS first when the
// tokenizer adds one), or the messages (with `signatures`, request_tools' result, as
// the tools' system block) rendered by the template and tokenized segment by segment.
// One function for Runtime::start_generate and the cluster router, so the router's
// prefix index and the node's cache see the same ids. invalid_argument: no messages
// and no raw prompt.
Result<std::vector<std::int32_t>> prompt_ids(const GenerateRequest& request,
                                             const std::vector<model::ToolSignature>& signatures,
                                             const model::Tokenizer& tokenizer, const model::ChatTemplate& chat);

}  // namespace arbor

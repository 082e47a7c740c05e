// The OpenAI-compatible wire format of /v1/chat/completions and /v1/completions:
// request validation (every error names its JSON pointer), response and stream chunk
// documents, and server-sent event framing. Pure functions; no I/O.
#pragma once

#include <expected>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "arbor/runtime.hpp"
#include "runtime/server/api_error.hpp"

namespace arbor::server {

struct CompletionRequest {
  bool chat = true;            // chat.completion vs text_completion
  GenerateRequest generate;    // tenant left for the caller to set (from the API key)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// Validates a request body. Unknown fields are ignored (clients send many); known ones
// must have the right type and range. `max_tokens_cap` bounds max_tokens.
// `raw_body` (the body's text) keeps a response_format schema's key order
// (response_format.hpp).
std::expected<CompletionRequest, ApiError> parse_completion_request(const nlohmann::json& body, bool chat,
                                                                    int max_tokens_cap,
                                                                    std::string_view raw_body = {});

// OpenAI finish_reason of a runtime one: "length" and "tool_calls" as they are, any
// other "stop".
std::string finish_reason(const GenerateResult& result);

// The result's tool_calls as OpenAI writes them: [{id, type: "function", function:
// {name, arguments}}], each with its "index" in a stream's delta (`delta`).
nlohmann::ordered_json tool_calls_json(const GenerateResult& result, bool delta);

nlohmann::ordered_json usage_json(const GenerateResult& result);

// The whole (non-streaming) response.
nlohmann::ordered_json completion_response(bool chat, const std::string& id, long created, const std::string& model,
                                           const GenerateResult& result);

// One stream chunk. `content` is the text delta; `role` is set on the first chat chunk;
// `finish` is the finish_reason of the last chunk ("" = null).
nlohmann::ordered_json completion_chunk(bool chat, const std::string& id, long created, const std::string& model,
                                        std::string_view content, bool role, const std::string& finish);

// "data: <json>\n\n" (and "event: <name>\n" first when `event` is set). Invalid UTF-8
// in strings is replaced, never thrown.
std::string sse_data(const nlohmann::ordered_json& doc, const std::string& event = "");
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

std::string dump(const nlohmann::ordered_json& doc);

}  // namespace arbor::server

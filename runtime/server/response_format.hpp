// The `response_format` of an OpenAI completion request, as constrained decoding:
//   {"type": "text"}         free text (the default, also when absent or null)
//   {"type": "json_object"}  any JSON object: the schema {"type":"object"}
//   {"type": "json_schema", "json_schema": {"name": ..., "schema": {...}, "strict": ...,
//    "description": ...}}    a document valid against `schema`, enforced token by token
//                            whether or not `strict` is true (it is never loosened)
// The schema is checked here, before anything runs: each keyword the engine cannot
// enforce (model/json_grammar.hpp) is named by its JSON pointer inside the request
// body ("/response_format/json_schema/schema/properties/n/multipleOf") in a 400.
// `raw_body` is the body's text: the schema is read from it again with its key order
// kept (properties are generated in the order written); empty = use `body` (its keys
// sorted, so properties come alphabetically).
#pragma once

#include <expected>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "model/json_schema.hpp"
#include "runtime/server/api_error.hpp"

namespace arbor::server {

// The value at `pointer` in the body with its keys in the order the client wrote them
// (read again from `raw_body`; empty = `body`'s, sorted). The pointer must exist.
model::Json ordered_value(const nlohmann::json& body, std::string_view raw_body, const std::string& pointer);
// The whole body so (`raw_body` read again; `body`'s sorted keys when it is empty or not an object).
model::Json ordered_body(const nlohmann::json& body, std::string_view raw_body);

// The schema as compact text, or a 400 naming every keyword the engine cannot enforce
// by its pointer in the body (`at` + the keyword's pointer in the schema); `what` starts
// the message ("response_format", "tools[1]").
std::expected<std::string, ApiError> enforceable_schema(const model::Json& schema, const std::string& at,
                                                        const std::string& what);

// The JSON Schema text to enforce, or nullopt for free text.
std::expected<std::optional<std::string>, ApiError> parse_response_format(const nlohmann::json& body,
                                                                          std::string_view raw_body);

}  // namespace arbor::server

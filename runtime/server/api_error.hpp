// Errors the server answers with: an HTTP status plus the OpenAI-style body
//   {"error": {"message": ..., "type": ..., "code": ..., "param": ...}}
// and JSON parsing that reports where a document is malformed (line:column).
#pragma once

#include <expected>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.hpp"

namespace arbor::server {

struct ApiError {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string code;     // machine-readable: "invalid_json", "invalid_parameter", ...
  std::string message;  // what, where (JSON pointer), how to fix
  std::string param;    // JSON pointer of the offending field, if any
};

ApiError bad_request(std::string code, std::string message, std::string param = "");
ApiError invalid_param(const std::string& pointer, const std::string& what);  // 400
ApiError not_found(std::string message);
ApiError method_not_allowed(const std::string& method, const std::string& allowed);
ApiError unauthorized(std::string message);
ApiError forbidden(std::string message);           // 403
ApiError too_many_requests(std::string message);   // 429
ApiError unavailable(std::string message);         // 503
ApiError payload_too_large(std::size_t limit);     // 413
// Maps a runtime error to a status: invalid_argument/too_long 400, not_found 404,
// out_of_memory 503, cancelled 499-as-503, everything else 500.
ApiError from_error(const Error& error);

std::string error_body(const ApiError& error);

// Parses a request body with parse_json_text (common/json_text.hpp: never throws, at
// most 64 levels deep); any failure -> 400 "invalid_json" with line:column.
std::expected<nlohmann::json, ApiError> parse_json(std::string_view text);

}  // namespace arbor::server

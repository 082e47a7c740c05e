#include "runtime/server/api_error.hpp"

#include "common/json_text.hpp"

namespace arbor::server {

ApiError bad_request(std::string code, std::string message, std::string param) {
  return ApiError{400, "invalid_request_error", std::move(code), std::move(message), std::move(param)};
}

ApiError invalid_param(const std::string& pointer, const std::string& what) {
  return bad_request("invalid_parameter", "'" + pointer + "' " + what, pointer);
}

ApiError not_found(std::string message) {
  return ApiError{404, "not_found_error", "not_found", std::move(message), ""};
}

ApiError method_not_allowed(const std::string& method, const std::string& allowed) {
  return ApiError{405, "invalid_request_error", "method_not_allowed",
                  "method " + method + " is not allowed here; allowed: " + allowed, ""};
}

ApiError unauthorized(std::string message) {
  return ApiError{401, "authentication_error", "invalid_api_key", std::move(message), ""};
}

ApiError too_many_requests(std::string message) {
  return ApiError{429, "rate_limit_error", "rate_limit_exceeded", std::move(message), ""};
}

ApiError forbidden(std::string message) {
  return ApiError{403, "permission_error", "forbidden", std::move(message), ""};
}

ApiError unavailable(std::string message) {
  return ApiError{503, "server_error", "overloaded", std::move(message), ""};
}

ApiError payload_too_large(std::size_t limit) {
  return ApiError{413, "invalid_request_error", "payload_too_large",
                  "request body is larger than the limit of " + std::to_string(limit) +
                      " bytes; send a smaller body (or raise limits.max_body_bytes)",
                  ""};
}

ApiError from_error(const Error& error) {
  switch (error.code) {
    case ErrorCode::invalid_argument:
    case ErrorCode::corrupt_data:
    case ErrorCode::unsupported: return bad_request("invalid_request", error.message);
    case ErrorCode::too_long: return bad_request("context_length_exceeded", error.message);
    case ErrorCode::not_found: return not_found(error.message);
    case ErrorCode::out_of_memory: return unavailable(error.message);
    case ErrorCode::cancelled: return unavailable("cancelled: " + error.message);
    case ErrorCode::timeout: return ApiError{504, "server_error", "timeout", error.message, ""};
    default: return ApiError{500, "server_error", "internal_error", error.describe(), ""};
  }
}

std::string error_body(const ApiError& error) {
  nlohmann::ordered_json e;
  e["message"] = error.message;
  e["type"] = error.type;
  e["code"] = error.code;
  e["param"] = error.param.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(error.param);
  nlohmann::ordered_json body;
  body["error"] = std::move(e);
  // Replace invalid UTF-8 (a message may quote client bytes) instead of throwing.
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::expected<nlohmann::json, ApiError> parse_json(std::string_view text) {
  auto doc = parse_json_text(text);
  if (doc) return std::move(*doc);
  return std::unexpected(bad_request("invalid_json", "malformed JSON at " + doc.error().describe() +
                                                         "; send a valid JSON object with Content-Type: application/json"));
}

}  // namespace arbor::server

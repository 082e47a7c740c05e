// Errors as values: every fallible call at a layer or actor boundary returns
// Result<T>. An Error says what went wrong, where, and (when known) how to fix it.
#pragma once

#include <expected>
#include <string>
#include <utility>

namespace arbor {

enum class ErrorCode {
  invalid_argument,  // caller passed something malformed (bad workflow, bad flag)
  not_found,         // a file, tenant, agent or run that does not exist
  corrupt_data,      // a file whose content breaks its format (GGUF, JSON)
  unsupported,       // well-formed but not handled (architecture, tensor type)
  out_of_memory,     // KV pool or quota exhausted and nothing can be evicted
  too_long,          // a prompt or sequence longer than the model or pool allows
  cancelled,         // stopped on request
  timeout,           // a deadline passed
  failed,            // an agent or actor failed after its retries
  internal,          // a broken invariant: a bug in Arbor
};

const char* to_string(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::internal;
  std::string message;  // what and where; ends with how to fix it when known

  std::string describe() const { return std::string(to_string(code)) + ": " + message; }
};

template <class T>
using Result = std::expected<T, Error>;

// `return fail(ErrorCode::not_found, "model file '" + path + "' does not exist");`
inline std::unexpected<Error> fail(ErrorCode code, std::string message) {
  return std::unexpected<Error>(Error{code, std::move(message)});
}

inline const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument: return "invalid argument";
    case ErrorCode::not_found: return "not found";
    case ErrorCode::corrupt_data: return "corrupt data";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::out_of_memory: return "out of memory";
    case ErrorCode::too_long: return "too long";
    case ErrorCode::cancelled: return "cancelled";
    case ErrorCode::timeout: return "timeout";
    case ErrorCode::failed: return "failed";
    case ErrorCode::internal: return "internal error";
  }
  return "unknown error";
}

}  // namespace arbor

// JSON Pointers (RFC 6901), the paths every error about a JSON document names.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace arbor {

// `pointer` + "/" + `token`, with '~' written "~0" and '/' written "~1".
inline std::string pointer_append(const std::string& pointer, std::string_view token) {
  std::string out = pointer + "/";
  for (char c : token) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

inline std::string pointer_append(const std::string& pointer, std::size_t index) {
  return pointer + "/" + std::to_string(index);
}

}  // namespace arbor

// A minimal stand-in for std::format (absent from g++ 12's library): "{}" placeholders
// are replaced in order by the arguments as an ostream prints them. Error messages only.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace arbor::model {

namespace detail {
inline void format_rest(std::ostringstream& out, std::string_view fmt) { out << fmt; }

template <class T, class... Rest>
void format_rest(std::ostringstream& out, std::string_view fmt, const T& first, const Rest&... rest) {
  const auto pos = fmt.find("{}");
  if (pos == std::string_view::npos) {
    out << fmt;
    return;
  }
  out << fmt.substr(0, pos);
  if constexpr (std::is_same_v<T, std::uint8_t> || std::is_same_v<T, std::int8_t>) out << int(first);
  else out << first;
  format_rest(out, fmt.substr(pos + 2), rest...);
}
}  // namespace detail

template <class... Args>
std::string format(std::string_view fmt, const Args&... args) {
  std::ostringstream out;
  detail::format_rest(out, fmt, args...);
  return out.str();
}

}  // namespace arbor::model

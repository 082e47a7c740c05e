#include "runtime/server/route_table.hpp"

#include <cctype>

namespace arbor::server {

bool plausible_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

bool path_matches(std::string_view pattern, std::string_view path, std::string& id) {
  constexpr std::string_view kHole = "{id}";
  const auto hole = pattern.find(kHole);
  if (hole == std::string_view::npos) return path == pattern;
  const std::string_view prefix = pattern.substr(0, hole), suffix = pattern.substr(hole + kHole.size());
  if (path.size() < prefix.size() + suffix.size() || !path.starts_with(prefix) || !path.ends_with(suffix))
    return false;
  const std::string_view middle = path.substr(prefix.size(), path.size() - prefix.size() - suffix.size());
  if (!plausible_id(middle)) return false;
  id = middle;
  return true;
}

}  // namespace arbor::server

// The server's routes as data: each route is a method and a path pattern, matched in
// table order (Api's table is in api.cpp). A path that no pattern fits is a 404; a
// path that fits only with other methods is a 405 whose Allow header lists those
// methods, in table order.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace arbor::server {

// A run id as the runtime makes them: 1 to 128 of [A-Za-z0-9_-.].
bool plausible_id(std::string_view id);

// Whether `path` fits `pattern`: equal, or equal but for the pattern's one "{id}",
// which takes one plausible id (set in `id`).
bool path_matches(std::string_view pattern, std::string_view path, std::string& id);

// What a table answers for one request: the route that takes it, else the methods that
// the path's pattern takes ("" = no route at this path).
template <class Route>
struct RouteLookup {
  const Route* route = nullptr;
  std::string pattern;  // the matched pattern: the metrics' route label
  std::string allowed;  // "GET, DELETE": the methods the pattern takes
  std::string id;       // the {id} segment, when the pattern has one
};

template <class Route, std::size_t N>
RouteLookup<Route> find_route(const Route (&table)[N], std::string_view method, std::string_view path) {
  RouteLookup<Route> found;
  for (const Route& r : table) {
    std::string id;
    if (!path_matches(r.pattern, path, id)) continue;
    if (found.pattern.empty()) found.pattern = r.pattern;
    if (r.pattern != found.pattern) continue;  // an earlier pattern took the path
    found.allowed += (found.allowed.empty() ? "" : ", ") + std::string(r.method);
    found.id = id;
    if (r.method == method && !found.route) found.route = &r;
  }
  return found;
}

}  // namespace arbor::server

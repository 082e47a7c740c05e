// The server's routing (Api::handle over its route table), without a socket: which
// (method, path) reaches which route, the 404 and 405 answers (with their Allow
// header), what needs a key, and the route label the request metrics count under.
#include <gtest/gtest.h>

#include "runtime/server/api.hpp"
#include "runtime/server/route_table.hpp"
#include "server_test_util.hpp"

namespace arbor::server {
namespace {

struct Routed {
  int status = 0;
  std::string allow;
  std::string content_type;
  std::string body;
};

class ServerRoutes : public ::testing::Test {
 protected:
  ServerRoutes() : api_(make_config(), backend_) {}

  static ServerConfig make_config() {
    ServerConfig c;
    c.auth = true;
    c.admin_key = "k-admin";
    c.keys["k-alpha"] = "alpha";
    return c;
  }

  Routed call(const std::string& method, const std::string& target, const std::string& key = "k-alpha") {
    auto ex = std::make_shared<Exchange>([] {});
    api_.handle(HttpRequest{method, target, key.empty() ? "" : "Bearer " + key, ""}, ex);
    const Exchange::Taken t = ex->take();
    EXPECT_EQ(t.mode, Exchange::Mode::full) << method << " " << target;
    Routed r{t.reply.status, "", t.reply.content_type, t.reply.body};
    for (const auto& [name, value] : t.reply.headers)
      if (name == "Allow") r.allow = value;
    return r;
  }

  // How many requests the metrics counted under (route, status), all tenants.
  std::uint64_t counted(const std::string& route, int status) const {
    std::uint64_t n = 0;
    for (const auto& [tenant, f] : const_cast<Api&>(api_).metrics().snapshot()) {
      auto it = f.requests.find({route, status});
      if (it != f.requests.end()) n += it->second;
    }
    return n;
  }

  test::FakeBackend backend_;
  Api api_;
};

TEST_F(ServerRoutes, EachPathReachesItsRouteWithOrWithoutAKey) {
  const Routed dashboard = call("GET", "/", "");
  EXPECT_EQ(dashboard.status, 200);
  EXPECT_EQ(dashboard.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(call("GET", "/health", "").status, 200);
  EXPECT_EQ(call("GET", "/v1/models", "").status, 401);
  EXPECT_EQ(call("GET", "/v1/models", "wrong").status, 401);
  EXPECT_EQ(call("GET", "/v1/models").status, 200);
  EXPECT_EQ(call("GET", "/v1/runs").status, 200);
  EXPECT_EQ(call("GET", "/v1/cache/stats?ignored=1").status, 200);
  EXPECT_EQ(call("GET", "/v1/cache/tree?max_nodes=0").status, 400);
  EXPECT_EQ(call("GET", "/metrics", "k-admin").content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(counted("/v1/models", 401), 2u);
  EXPECT_EQ(counted("/v1/cache/tree", 400), 1u);
}

TEST_F(ServerRoutes, ARunIdIsOnePlausibleSegment) {
  for (const std::string& target : std::vector<std::string>{"/v1/runs/r-1.x_2", "/v1/runs/events", "/v1/runs/r-1/events"}) {
    const Routed r = call("GET", target);
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_NE(r.body.find("no run '"), std::string::npos) << target << ": " << r.body;
  }
  EXPECT_EQ(call("DELETE", "/v1/runs/r-1").status, 404);
  EXPECT_EQ(counted("/v1/runs/{id}", 404), 3u);
  EXPECT_EQ(counted("/v1/runs/{id}/events", 404), 1u);
  for (const std::string& target : std::vector<std::string>{"/v1/runs/", "/v1/runs//events", "/v1/runs/a b", "/v1/runs/a/b",
                                   "/v1/runs/" + std::string(129, 'a'), "/v1/runs/r-1/events/"}) {
    const Routed r = call("GET", target);
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_NE(r.body.find("no endpoint at"), std::string::npos) << target << ": " << r.body;
  }
  EXPECT_EQ(counted("other", 404), 6u);
}

TEST_F(ServerRoutes, AWrongMethodIs405WithTheRoutesMethodsBeforeAnyKeyCheck) {
  const std::pair<std::string, std::string> cases[] = {
      {"/", "GET"},
      {"/health", "GET"},
      {"/v1/chat/completions", "POST"},
      {"/v1/completions", "POST"},
      {"/v1/runs", "GET, POST"},
      {"/v1/runs/r-1", "GET, DELETE"},
      {"/v1/runs/r-1/events", "GET"},
      {"/v1/cache/stats", "GET"},
  };
  for (const auto& [path, allow] : cases) {
    const Routed r = call("PUT", path, "");
    EXPECT_EQ(r.status, 405) << path;
    EXPECT_EQ(r.allow, allow) << path;
  }
  EXPECT_EQ(call("GET", "/v1/chat/completions", "").allow, "POST");
  EXPECT_EQ(call("POST", "/v1/runs/r-1/events").allow, "GET");
  EXPECT_EQ(call("GETX", "/v1/runs").status, 405);
  EXPECT_EQ(call("get", "/v1/runs").status, 405);  // methods are case-sensitive
  EXPECT_EQ(counted("/v1/runs/{id}/events", 405), 2u);
  EXPECT_EQ(call("PUT", "/v1/nothing", "").status, 404);  // no route: 404 whatever the method
}

TEST(RouteTable, APatternTakesOneIdAndTheTableListsEveryMethodOfAPath) {
  std::string id;
  EXPECT_TRUE(path_matches("/v1/runs/{id}/events", "/v1/runs/r-1/events", id));
  EXPECT_EQ(id, "r-1");
  EXPECT_FALSE(path_matches("/v1/runs/{id}/events", "/v1/runs/events", id));  // too short for both ends
  EXPECT_FALSE(path_matches("/v1/runs/{id}", "/v1/runs/a/b", id));
  EXPECT_FALSE(path_matches("/v1/runs", "/v1/runs/", id));
  struct Row {
    std::string_view method, pattern;
  };
  const Row table[] = {{"GET", "/a"}, {"POST", "/a"}, {"GET", "/a/{id}"}, {"DELETE", "/a/{id}"}};
  const auto post = find_route(table, "POST", "/a");
  EXPECT_EQ(post.route, &table[1]);
  EXPECT_EQ(post.allowed, "GET, POST");
  const auto put = find_route(table, "PUT", "/a/x");
  EXPECT_EQ(put.route, nullptr);
  EXPECT_EQ(put.pattern, "/a/{id}");
  EXPECT_EQ(put.allowed, "GET, DELETE");
  EXPECT_EQ(put.id, "x");
  EXPECT_TRUE(find_route(table, "GET", "/b").pattern.empty());
}

}  // namespace
}  // namespace arbor::server

// The fixture of the server suites that run on the real runtime: one Runtime and its
// backend per suite (loading the model is the slow part), a Server per test. CRTP so
// that each suite has its own runtime: `class ServerX : public RealServerTest<ServerX>`,
// with an optional `static RuntimeConfig runtime_config()` to change the runtime's.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "runtime/server/server.hpp"
#include "runtime_test_util.hpp"
#include "server_test_util.hpp"

namespace arbor::server::test {

template <class Suite>
class RealServerTest : public ::testing::Test {
 public:
  static RuntimeConfig runtime_config() { return arbor::testing::small_config(); }

 protected:
  static void SetUpTestSuite() {
    auto runtime = Runtime::create(Suite::runtime_config());
    ASSERT_TRUE(runtime.has_value()) << runtime.error().describe();
    runtime_ = std::move(*runtime).release();
    backend_ = make_runtime_backend(*runtime_).release();
  }
  static void TearDownTestSuite() {
    delete backend_;  // cancels and waits for what is in flight, before the runtime goes
    delete runtime_;
    backend_ = nullptr;
    runtime_ = nullptr;
  }
  void TearDown() override { server_.reset(); }

  // (Re)starts the server on `backend` (the real one by default).
  void start_server(const ServerConfig& config, Backend* backend = nullptr) {
    server_.reset();
    auto s = Server::start(config, backend ? *backend : *backend_);
    ASSERT_TRUE(s.has_value()) << s.error().message;
    server_ = std::move(*s);
    port_ = server_->port();
  }

  // Back to idle: no admission slot, locked page, live sequence or queued request left,
  // and the cache's invariants hold. `key` reads /v1/cache/stats (an admin key sees all).
  void expect_idle(const std::string& key = "") {
    EXPECT_TRUE(eventually([&] { return server_->api().inflight() == 0; })) << server_->api().inflight();
    const auto stats = request(port_, "GET", "/v1/cache/stats", "", key).json();
    if (stats.contains("server")) {  // admin view
      EXPECT_EQ(stats["server"]["inflight"], 0) << stats.dump();
    }
    EXPECT_EQ(stats["global"]["pages_locked"], 0) << stats.dump();
    EXPECT_EQ(stats["global"]["live_sequences"], 0) << stats.dump();
    EXPECT_EQ(stats["global"]["queued_requests"], 0) << stats.dump();
    EXPECT_EQ(runtime_->check_invariants(), "");
  }

  static inline Runtime* runtime_ = nullptr;
  static inline Backend* backend_ = nullptr;
  std::unique_ptr<Server> server_;
  int port_ = 0;
};

}  // namespace arbor::server::test

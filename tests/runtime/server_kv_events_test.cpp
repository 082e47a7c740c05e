// GET /v1/kv_events on the real runtime: an admin follows the cache's pages as a
// generation stores them; a tenant key is refused (403).
#include <gtest/gtest.h>

#include "cache/page_key.hpp"
#include "real_server_fixture.hpp"
#include "runtime/server/server.hpp"
#include "runtime_test_util.hpp"
#include "server_test_util.hpp"

namespace arbor::server::test {
namespace {

constexpr const char* kAlpha = "kv-key-alpha-01";
constexpr const char* kAdmin = "kv-key-admin-02";

class ServerKvEvents : public RealServerTest<ServerKvEvents> {
 protected:
  void SetUp() override {
    auto c = parse_server_config(std::string(R"({"port":0,"admin_key":")") + kAdmin + R"(","keys":{")" + kAlpha +
                                 R"(":"alpha"}})");
    ASSERT_TRUE(c.has_value()) << c.error().message;
    start_server(*c);
  }
};

TEST_F(ServerKvEvents, AnAdminSeesTheStoredPagesOfAGeneration) {
  net::io_context ioc;
  beast::tcp_stream stream(connect_loopback(ioc, port_));
  net::write(stream, net::buffer("GET /v1/kv_events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                                 std::string(kAdmin) + "\r\n\r\n"));
  std::string text;
  read_until(stream, text, [](const std::string& t) { return t.find(": arbor kv events") != std::string::npos; });
  ASSERT_NE(text.find("200 OK"), std::string::npos) << text;
  ASSERT_NE(text.find("text/event-stream"), std::string::npos) << text;

  const auto reply = request(port_, "POST", "/v1/chat/completions",
                             chat_body("Notes: " + std::string(60, 'q') + " end.", "Say yes.", 2), kAlpha);
  ASSERT_EQ(reply.status, 200) << reply.body;
  const auto stored_alpha = [](const std::string& t) {
    for (const auto& p : sse_payloads(t)) {
      auto j = nlohmann::json::parse(p, nullptr, false);
      if (!j.is_discarded() && j["type"] == "stored" && j["tenant"] == "alpha") return true;
    }
    return false;
  };
  read_until(stream, text, stored_alpha);
  ASSERT_TRUE(stored_alpha(text)) << text;
  for (const auto& p : sse_payloads(text)) {
    auto j = nlohmann::json::parse(p, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << p;
    if (j["type"] != "stored" || j["tenant"] != "alpha") continue;
    const std::size_t P = j["page_size"].get<std::size_t>();
    EXPECT_EQ(P, std::size_t(runtime_->config().page_size));
    EXPECT_TRUE(j["parent"].is_null()) << "the first pages of a fresh prompt hang from the root";
    const auto tokens = j["tokens"].get<std::vector<std::int32_t>>();
    ASSERT_EQ(tokens.size(), j["keys"].size() * P);
    ASSERT_FALSE(tokens.empty());
    std::vector<std::string> want;
    for (auto k : cache::page_keys("alpha", tokens, P)) want.push_back(page_key_text(k));
    EXPECT_EQ(j["keys"].get<std::vector<std::string>>(), want);
    EXPECT_GT(j["seq"].get<std::uint64_t>(), 0u);
    break;  // the first one
  }
}

TEST_F(ServerKvEvents, ATenantKeyIsRefused) {
  const auto r = request(port_, "GET", "/v1/kv_events", "", kAlpha);
  EXPECT_EQ(r.status, 403);
  const auto j = r.json();
  EXPECT_EQ(j["error"]["code"], "forbidden") << r.body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find("admin key"), std::string::npos) << r.body;
  EXPECT_EQ(request(port_, "GET", "/v1/kv_events").status, 401);
}

}  // namespace
}  // namespace arbor::server::test

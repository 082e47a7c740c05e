// Hostile use of the server, fairness and admission slots (issue 8, defects 1 and 4):
// requests that fail after admission never leak their slot, and one tenant's huge
// workflow run neither fails nor locks out the other tenants. Every case ends by
// checking that in-flight counts and the cache return to idle.
#include <gtest/gtest.h>

#include <stdexcept>

#include "runtime/server/admission.hpp"
#include "runtime/server/server.hpp"
#include "real_server_fixture.hpp"
#include "runtime_test_util.hpp"
#include "server_test_util.hpp"

namespace arbor::server::test {
namespace {

constexpr const char* kAlpha = "hostile-key-alpha-1";
constexpr const char* kBeta = "hostile-key-beta-22";
constexpr const char* kAdmin = "hostile-key-admin-3";

// Default limits (max_inflight 64), two tenants and an admin.
ServerConfig two_tenants() {
  auto c = parse_server_config(std::string(R"({"port":0,"admin_key":")") + kAdmin + R"(","keys":{")" + kAlpha +
                               R"(":"alpha",")" + kBeta + R"(":"beta"}})");
  EXPECT_TRUE(c.has_value()) << c.error().message;
  return *c;
}

int health_inflight(int port) { return request(port, "GET", "/health").json()["inflight"].get<int>(); }

// A backend with a bug: starting work throws (after the server admitted it).
class ThrowingBackend final : public Backend {
 public:
  std::string model_name() const override { return inner.model_name(); }
  std::size_t context_length() const override { return inner.context_length(); }
  Result<std::shared_ptr<Generation>> start_generate(const GenerateRequest& request,
                                                     std::function<void(const std::string&)> on_token,
                                                     std::function<void(const Result<GenerateResult>&)> on_done) override {
    if (request.messages.back().content == "THROW") throw std::out_of_range("backend bug");
    return inner.start_generate(request, std::move(on_token), std::move(on_done));
  }
  Result<std::shared_ptr<RunControl>> start_run(const std::string& workflow, const std::map<std::string, std::string>& inputs,
                                                EventCallback on_event, const std::string& tenant,
                                                const DocumentAccess& documents) override {
    if (workflow.find("THROW") != std::string::npos) throw std::out_of_range("backend bug");
    return inner.start_run(workflow, inputs, std::move(on_event), tenant, documents);
  }
  std::string run_json(const RunResult& r) const override { return inner.run_json(r); }
  CacheStats cache_stats() const override { return inner.cache_stats(); }
  std::vector<CacheTreeNode> cache_tree(const std::string& t, std::size_t n) const override {
    return inner.cache_tree(t, n);
  }
  FakeBackend inner;
};

// More failing requests than max_inflight (64): with a leaked slot per failure every
// later request would get 503 (the lockout of defect 1).
TEST(ServerHostileSlots, ExceptionsAfterAdmissionReleaseTheSlot) {
  ThrowingBackend backend;
  auto server = Server::start(two_tenants(), backend);
  ASSERT_TRUE(server.has_value()) << server.error().message;
  const int port = (*server)->port();
  for (int i = 0; i < 70; ++i) {
    auto chat = request(port, "POST", "/v1/chat/completions", chat_body("", "THROW", 4), kAlpha);
    ASSERT_EQ(chat.status, 500) << i << ": " << chat.body;
    auto run = request(port, "POST", "/v1/runs", R"({"workflow":{"name":"THROW","agents":[]}})", kBeta);
    ASSERT_EQ(run.status, 500) << i << ": " << run.body;
  }
  EXPECT_EQ((*server)->api().inflight(), 0);
  EXPECT_EQ(health_inflight(port), 0);
  auto stats = request(port, "GET", "/v1/cache/stats", "", kAdmin).json();
  EXPECT_EQ(stats["server"]["inflight"], 0);
  EXPECT_EQ(stats["served"]["alpha"]["inflight"], 0);
  EXPECT_EQ(stats["served"]["beta"]["inflight"], 0);
  auto ok = request(port, "POST", "/v1/chat/completions", chat_body("", "hello there", 4), kAlpha);
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_TRUE(eventually([&] { return (*server)->api().inflight() == 0; }));
}

// Slots are released exactly once, and a slot that outlives its Admission (a run's
// entry kept by the runtime after the server is gone) releases nothing (ASan checks
// that it touches neither the Admission nor the Metrics).
TEST(ServerHostileSlots, SlotsReleaseOnceAndMaySafelyOutliveTheServer) {
  const ServerConfig config = two_tenants();
  AdmissionSlot survivor;
  {
    Metrics metrics;
    Admission admission(config, metrics);
    auto a = admission.admit("alpha", false);
    ASSERT_TRUE(a.has_value());
    AdmissionSlot moved = std::move(*a);
    EXPECT_FALSE(a->held());
    EXPECT_EQ(admission.inflight(), 1);
    moved.release();
    moved.release();
    EXPECT_EQ(admission.inflight(), 0);
    EXPECT_EQ(metrics.inflight("alpha"), 0);
    EXPECT_FALSE(admission.admit("beta", true).has_value());  // draining: no slot
    auto b = admission.admit("beta", false);
    ASSERT_TRUE(b.has_value());
    survivor = std::move(*b);
    EXPECT_EQ(admission.inflight("beta"), 1);
    EXPECT_EQ(metrics.inflight("beta"), 1);
  }
  EXPECT_FALSE(survivor.held());
  survivor.release();
}

// The real runtime behind the server.
class ServerHostileFair : public RealServerTest<ServerHostileFair> {
 public:
  static RuntimeConfig runtime_config() {
    RuntimeConfig rc = arbor::testing::small_config();
    rc.kv_memory_mb = 128;
    rc.page_size = 1;  // siblings with equal prompts then compute one token each (fast big fan-outs)
    rc.max_queued_requests = 64;  // per tenant queue bound, and each run's window
    return rc;
  }

 protected:
  void SetUp() override { start_server(two_tenants()); }

  // In-flight work, server and cache, back to idle.
  void expect_idle() {
    RealServerTest::expect_idle(kAdmin);
    EXPECT_EQ(health_inflight(port_), 0);
  }

};

// A workflow whose text overflows a double fails inside the runtime's loader, after
// admission: 70 of them (> max_inflight) must not lock the server.
TEST_F(ServerHostileFair, WorkflowsFailingAfterAdmissionLeaveNoSlotBehind) {
  const std::string body =
      nlohmann::json{{"workflow", R"({"name":"x","defaults":{"timeout_ms":1e999},"agents":[{"id":"a","task":"hi"}]})"}}
          .dump();
  for (int i = 0; i < 70; ++i) {
    auto r = request(port_, "POST", "/v1/runs", body, i % 2 ? kAlpha : kBeta);
    ASSERT_NE(r.status, 503) << i << ": " << r.body;  // the lockout
    ASSERT_NE(r.status, 429) << i << ": " << r.body;
    ASSERT_NE(r.status, 202) << i << ": " << r.body;
  }
  auto chat = request(port_, "POST", "/v1/chat/completions", chat_body("", "Say hi.", 2), kBeta);
  EXPECT_EQ(chat.status, 200) << chat.body;
  expect_idle();
}

// Tenant alpha starts a run of 301 agents (more than its queue holds); tenant beta's
// chat, sent while alpha's requests wait at the scheduler, is served, and the big run
// completes too (its agents wait in the run instead of failing on a full queue).
TEST_F(ServerHostileFair, OtherTenantsAreServedWhileABigRunIsInFlight) {
  const std::string workflow = arbor::testing::wide_workflow(300, "ignored");
  auto started = request(port_, "POST", "/v1/runs", nlohmann::json{{"workflow", nlohmann::json::parse(workflow)}}.dump(), kAlpha);
  ASSERT_EQ(started.status, 202) << started.body;
  const std::string id = started.json()["id"];
  auto run_status = [&] { return request(port_, "GET", "/v1/runs/" + id, "", kAlpha).json()["status"].get<std::string>(); };
  ASSERT_TRUE(eventually([&] {
    auto g = request(port_, "GET", "/v1/cache/stats", "", kAdmin).json()["global"];
    return g["live_sequences"].get<int>() + g["queued_requests"].get<int>() > 0 || run_status() != "running";
  }));
  auto chat = request(port_, "POST", "/v1/chat/completions", chat_body("", "Name a river.", 4), kBeta);
  EXPECT_EQ(chat.status, 200) << chat.body;
  ASSERT_TRUE(eventually([&] { return run_status() != "running"; }, 300));
  auto done = request(port_, "GET", "/v1/runs/" + id, "", kAlpha).json();
  EXPECT_EQ(done["status"], "ok") << done.dump().substr(0, 2000);
  EXPECT_EQ(done["tenant"], "alpha");
  ASSERT_EQ(done["agents"].size(), 301u);
  for (const auto& a : done["agents"]) ASSERT_EQ(a["status"], "ok") << a.dump();
  expect_idle();
  // The lead's warm-up of the shared prefix is counted apart from prompt tokens.
  auto served = request(port_, "GET", "/v1/cache/stats", "", kAlpha).json()["served"]["alpha"];
  EXPECT_EQ(served["prompt_tokens"].get<int>(), served["cached_tokens"].get<int>() + served["computed_tokens"].get<int>());
  EXPECT_EQ(served["warmup_tokens"], done["totals"]["warmup_tokens"]);
  EXPECT_GT(served["warmup_tokens"].get<int>(), 0);
  EXPECT_NE(request(port_, "GET", "/metrics", "", kAlpha).body.find("arbor_warmup_tokens_total{tenant=\"alpha\"}"),
            std::string::npos);
}

}  // namespace
}  // namespace arbor::server::test

// Fair admission in the scheduler (issue 8, defect 4), on the real model: tenants are
// admitted in turns whatever their queue lengths, each tenant has its own queue bound,
// and a tenant held back by its own quota does not hold the others back.
#include <gtest/gtest.h>

#include "batch_engine_test_util.hpp"

namespace arbor::actors {
namespace {

using namespace testing;

// Every request's prompt (equal prompts are fine: with caching off nothing is shared).
std::vector<std::int32_t> prompt() { return chat_prompt("You are a careful assistant.", "Name one colour."); }

// Pages one request needs (prompt + 1 decoded position): a pool or quota of twice this
// minus one holds exactly one request at a time.
int pages_per_request() { return int(prompt().size() + 1 + kPage - 1) / int(kPage); }

// Caching off: every request needs its own pages, so memory decides who runs.
BatchEngineConfig fair_config(int num_pages) { return config(num_pages, false); }

struct Tenants {
  Harness h;
  std::map<std::uint64_t, std::string> tenant_of;

  explicit Tenants(BatchEngineConfig c) : h(std::move(c)) {}
  std::uint64_t submit(const std::string& tenant, const std::string& run = "") {
    const auto id = h.submit(prompt(), 2, tenant, run);
    tenant_of[id] = tenant;
    return id;
  }
  // Tenants of the requests that finished ok, in the order they finished.
  std::vector<std::string> finished_ok() const {
    std::vector<std::string> out;
    for (auto id : h.finished)
      if (h.results.at(id).ok) out.push_back(tenant_of.at(id));
    return out;
  }
  void drain() {
    h.drain();
    h.expect_clean();
    EXPECT_EQ(h.s->snapshot().queued_requests, 0);
  }
};

// The pool holds one request at a time, so requests finish in admission order. The
// flooding tenant queued six before the other queued three: they alternate.
TEST(BatchEngineFair, TenantsAreAdmittedRoundRobin) {
  Tenants t(fair_config(2 * pages_per_request() - 1));
  for (int i = 0; i < 6; ++i) t.submit("flood");
  for (int i = 0; i < 3; ++i) t.submit("calm");
  t.drain();
  const std::vector<std::string> expected = {"flood", "calm", "flood", "calm", "flood",
                                             "calm",  "flood", "flood", "flood"};
  EXPECT_EQ(t.finished_ok(), expected);
}

// max_queued_requests bounds each tenant's queue of requests outside runs: the flood
// is refused beyond it, the other tenant is not. A run's requests are bounded by its
// run actor instead, so they are never refused for a full queue.
TEST(BatchEngineFair, EachTenantHasItsOwnQueueBound) {
  BatchEngineConfig c = fair_config(64);
  c.max_queued_requests = 4;
  Tenants t(c);
  for (int i = 0; i < 6; ++i) t.submit("flood");
  ASSERT_EQ(t.h.results.size(), 2u);  // the 5th and 6th, refused at submit
  for (const auto& [id, res] : t.h.results) {
    EXPECT_EQ(res.error_code, int(ErrorCode::out_of_memory));
    EXPECT_NE(res.error.find("admission queue of tenant 'flood' is full"), std::string::npos) << res.error;
  }
  for (int i = 0; i < 3; ++i) t.submit("calm");
  for (int i = 0; i < 6; ++i) t.submit("flood", "run-1");
  EXPECT_EQ(t.h.results.size(), 2u);  // nothing else refused
  EXPECT_EQ(t.h.s->snapshot().queued_requests, 4 + 3 + 6);
  t.drain();
  EXPECT_EQ(t.finished_ok().size(), 4u + 3u + 6u);
}

// One request of tenant 'small' fills its quota; its second waits for the first, but
// the other tenant's requests go meanwhile instead of queueing behind it.
TEST(BatchEngineFair, ATenantAtItsQuotaDoesNotBlockOthers) {
  BatchEngineConfig c = fair_config(128);
  c.tenants["small"] = cache::TenantConfig{std::size_t(2 * pages_per_request() - 1), false};
  Tenants t(c);
  for (int i = 0; i < 3; ++i) t.submit("small");
  for (int i = 0; i < 3; ++i) t.submit("other");
  t.h.s->step();
  EXPECT_EQ(t.h.s->snapshot().live_sequences, 1 + 3);
  EXPECT_EQ(t.h.s->snapshot().queued_requests, 2);
  t.drain();
  EXPECT_EQ(t.finished_ok().size(), 6u);
}

}  // namespace
}  // namespace arbor::actors

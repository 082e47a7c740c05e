// Runtime::subscribe_kv_events on the real model: the events are the cache's pages,
// exactly (replayed into a set, they equal each tenant's cached pages; removed keys
// equal the evictions), keyed as cache/page_key.hpp computes from their token ids.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <set>

#include "cache/page_key.hpp"
#include "runtime_test_util.hpp"

namespace arbor::testing {
namespace {

struct Recorder {
  std::mutex mu;
  std::vector<KvEvent> events;
  void operator()(const KvEvent& e) {
    std::lock_guard lock(mu);
    events.push_back(e);
  }
  std::vector<KvEvent> take() {
    std::lock_guard lock(mu);
    return events;
  }
};

std::string long_prompt(int n) {
  std::string text = "Record " + std::to_string(n) + ".";
  const char* words[] = {"harbor", "lantern", "meadow", "copper", "glacier", "orchard", "canyon", "violet"};
  for (int i = 0; i < 120; ++i) text += std::string(" ") + words[(i * (n + 3)) % 8];
  return text;
}

TEST(KvEvents, ReplayedEventsEqualTheCachedPagesAndTheEvictions) {
  RuntimeConfig config = small_config();
  config.kv_memory_mb = 6;  // a few hundred tokens: later prompts evict earlier ones
  auto rt = make_runtime(config);
  ASSERT_TRUE(rt);
  Recorder recorder;
  auto subscription = rt->subscribe_kv_events([&](const KvEvent& e) { recorder(e); });
  const std::size_t P = std::size_t(rt->config().page_size);
  for (int i = 0; i < 6; ++i) {
    GenerateRequest request;
    request.tenant = i % 2 ? "t2" : "t1";
    request.raw_prompt = long_prompt(i);
    request.sampling.max_tokens = 4;
    auto r = rt->generate(request);
    ASSERT_TRUE(r) << r.error().describe();
  }
  const auto stats = rt->cache_stats();
  ASSERT_GT(stats.evictions, 0u) << "the pool should be small enough to evict; pages_total " << stats.pages_total;
  // Events precede the results of the requests that caused them (same cache thread).
  const auto events = recorder.take();
  ASSERT_FALSE(events.empty());
  std::map<std::string, std::set<std::uint64_t>> cached;
  std::uint64_t removed = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    EXPECT_EQ(e.sequence, events[0].sequence + i) << "sequence numbers have no gap";
    EXPECT_TRUE(e.tenant == "t1" || e.tenant == "t2") << e.tenant;
    EXPECT_EQ(e.page_size, P);
    auto& keys = cached[e.tenant];
    if (e.kind == KvEvent::Kind::stored) {
      ASSERT_EQ(e.tokens.size(), e.keys.size() * P);
      // The chain, recomputed from the token ids: from the parent, or the tenant's seed.
      cache::PageKey h = e.parent ? *e.parent : cache::page_key_seed(e.tenant);
      if (e.parent) {
        EXPECT_TRUE(keys.contains(*e.parent)) << "a parent is a cached page";
      }
      for (std::size_t p = 0; p < e.keys.size(); ++p) {
        h = cache::next_page_key(h, std::span(e.tokens).subspan(p * P, P));
        EXPECT_EQ(e.keys[p], h);
        EXPECT_TRUE(keys.insert(h).second) << "stored twice without removal";
      }
    } else {
      ASSERT_EQ(e.kind, KvEvent::Kind::removed);
      for (auto k : e.keys) EXPECT_EQ(keys.erase(k), 1u) << "removed a page never stored";
      removed += e.keys.size();
    }
  }
  EXPECT_EQ(removed, stats.evictions);
  for (const char* t : {"t1", "t2"}) {
    ASSERT_TRUE(stats.tenants.contains(t));
    EXPECT_EQ(cached[t].size(), stats.tenants.at(t).used_pages) << t;
  }
  // Tenants never share a key.
  for (auto k : cached["t1"]) EXPECT_FALSE(cached["t2"].contains(k));
  // Each event reads back from the stream's JSON as it was.
  for (auto e : events) {
    e.node = "10.0.0.7:7101";  // as a router's stream names it
    const auto back = kv_event_from_json(nlohmann::json::parse(kv_event_json(e).dump()));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->kind, e.kind);
    EXPECT_EQ(back->tenant, e.tenant);
    EXPECT_EQ(back->keys, e.keys);
    EXPECT_EQ(back->parent, e.parent);
    EXPECT_EQ(back->tokens, e.tokens);
    EXPECT_EQ(back->page_size, e.page_size);
    EXPECT_EQ(back->sequence, e.sequence);
    EXPECT_EQ(back->node, e.node);
  }
  expect_clean(*rt);
}

// A malformed document is an error naming what is wrong, never a partial event.
TEST(KvEvents, AMalformedDocumentIsRefusedSayingWhy) {
  const auto good = nlohmann::json::parse(
      R"({"seq":3,"type":"stored","tenant":"t","page_size":2,"keys":["00000000000000ff"],"parent":null,"tokens":[5,6]})");
  ASSERT_TRUE(kv_event_from_json(good));
  EXPECT_FALSE(kv_event_from_json(good)->parent);
  auto refused = [&](const char* key, const nlohmann::json& value, const std::string& says) {
    auto doc = good;
    if (value.is_discarded()) doc.erase(key);
    else doc[key] = value;
    const auto r = kv_event_from_json(doc);
    ASSERT_FALSE(r) << key;
    EXPECT_EQ(r.error().code, ErrorCode::corrupt_data);
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  };
  const nlohmann::json missing(nlohmann::json::value_t::discarded);
  refused("type", "evicted", "\"type\"");
  refused("seq", missing, "\"seq\"");
  refused("page_size", -1, "\"page_size\"");
  refused("keys", nlohmann::json::array({"ff"}), "16 hex digits");
  refused("parent", 7, "\"parent\"");
  refused("tokens", nlohmann::json::array({5}), "keys x page_size");
  refused("tokens", nlohmann::json::array({5, "six"}), "token id");
  EXPECT_FALSE(kv_event_from_json(nlohmann::json::array()));
}

TEST(KvEvents, AResetSubscriptionHearsNothingMoreEvenFromInsideItsCallback) {
  auto rt = make_runtime();
  ASSERT_TRUE(rt);
  std::atomic<int> calls{0};
  KvEventSubscription subscription;
  Recorder other;
  auto second = rt->subscribe_kv_events([&](const KvEvent& e) { other(e); });
  subscription = rt->subscribe_kv_events([&](const KvEvent&) {
    ++calls;
    subscription.reset();  // from inside the callback: no further call
  });
  GenerateRequest request;
  request.raw_prompt = long_prompt(1);
  request.sampling.max_tokens = 40;  // decode fills pages: more than one event
  ASSERT_TRUE(rt->generate(request));
  request.raw_prompt = long_prompt(2);
  ASSERT_TRUE(rt->generate(request));
  EXPECT_EQ(calls.load(), 1);
  EXPECT_GT(other.take().size(), 1u);  // the other subscriber heard them all
  second.reset();
  const auto before = other.take().size();
  request.raw_prompt = long_prompt(3);
  ASSERT_TRUE(rt->generate(request));
  EXPECT_EQ(other.take().size(), before);
}

}  // namespace
}  // namespace arbor::testing

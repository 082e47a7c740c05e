// runtime/cluster/route_policy: the router's prefix index and the routing rule, against
// exact expected values (page counts, chosen nodes).
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "cache/page_key.hpp"
#include "runtime/cluster/cluster_backend.hpp"
#include "runtime/cluster/route_policy.hpp"

namespace arbor::cluster {
namespace {

std::vector<std::int32_t> ids(std::int32_t first, std::size_t n) {
  std::vector<std::int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

TEST(ClusterPrefixIndex, MatchesWholePagesOfTheSharedPrefix) {
  PrefixIndex index(16, 1000);
  const auto doc = ids(100, 40);  // 2 full pages + 8 tokens
  EXPECT_EQ(index.match("alice", doc), 0u);
  index.insert("alice", doc);
  EXPECT_EQ(index.num_pages(), 2u);  // the partial last page is not listed
  EXPECT_EQ(index.match("alice", doc), 32u);
  auto other = doc;
  other[20] = 7;  // differs in the second page
  EXPECT_EQ(index.match("alice", other), 16u);
  other[3] = 7;  // and in the first
  EXPECT_EQ(index.match("alice", other), 0u);
  // A longer prompt over the same document matches the document's pages.
  auto longer = doc;
  longer.insert(longer.end(), 30, 5);
  EXPECT_EQ(index.match("alice", longer), 32u);
}

TEST(ClusterPrefixIndex, NeverMatchesAnotherTenantsPrefix) {
  PrefixIndex index(16, 1000);
  const auto doc = ids(100, 64);
  index.insert("alice", doc);
  EXPECT_EQ(index.match("alice", doc), 64u);
  EXPECT_EQ(index.match("bob", doc), 0u);
  EXPECT_EQ(index.match("alic", doc), 0u);
  index.insert("bob", doc);
  EXPECT_EQ(index.num_pages(), 8u);  // one chain each
}

// The node's KV events name pages with cache/page_key.hpp; the index applies them.
TEST(ClusterPrefixIndex, AppliesANodesStoredAndRemovedKeys) {
  PrefixIndex index(16, 1000);
  const auto doc = ids(100, 64);
  const auto keys = cache::page_keys("alice", doc, 16);  // what the node's cache would send
  index.insert_keys(keys);
  EXPECT_EQ(index.num_pages(), 4u);
  EXPECT_EQ(index.match("alice", doc), 64u);
  EXPECT_EQ(index.match("bob", doc), 0u);
  // The node evicted the last two pages (leaf first): the match stops before them.
  index.remove_keys(std::vector<std::uint64_t>{keys[3], keys[2]});
  EXPECT_EQ(index.num_pages(), 2u);
  EXPECT_EQ(index.match("alice", doc), 32u);
  index.remove_keys(std::vector<std::uint64_t>{keys[3], 12345});  // absent keys: nothing
  EXPECT_EQ(index.num_pages(), 2u);
  // The router's own insert and the node's keys are the same keys.
  index.insert("alice", doc);
  EXPECT_EQ(index.num_pages(), 4u);
  index.remove_keys(keys);
  EXPECT_EQ(index.num_pages(), 0u);
  EXPECT_EQ(index.match("alice", doc), 0u);
}

TEST(ClusterPrefixIndex, EvictsTheLeastRecentlyUsedDeepestPagesFirst) {
  PrefixIndex index(16, 4);
  const auto a = ids(0, 48), b = ids(1000, 48);
  index.insert("t", a);
  index.insert("t", b);  // 6 pages listed > 4: a's two deepest go
  EXPECT_EQ(index.num_pages(), 4u);
  EXPECT_EQ(index.match("t", b), 48u);
  EXPECT_EQ(index.match("t", a), 16u);
  index.insert("t", a);  // a used again: b's deepest pages go
  EXPECT_EQ(index.match("t", a), 48u);
  EXPECT_EQ(index.match("t", b), 16u);
  index.clear();
  EXPECT_EQ(index.num_pages(), 0u);
  EXPECT_EQ(index.match("t", a), 0u);
}

TEST(ClusterChooseNode, LongestPrefixWinsUnlessOverloaded) {
  std::vector<NodeLoad> nodes = {{true, 2, 64, 10}, {true, 0, 128, 10}, {true, 1, 0, 0}};
  auto c = choose_node(nodes, 4);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->node, 1u);
  EXPECT_EQ(c->kind, RouteKind::prefix);
  EXPECT_EQ(c->matched_tokens, 128u);
  // Node 1 has 5 in flight, node 2 has 1: 5 <= 1 + 4 keeps the prefix...
  nodes[1].inflight = 5;
  c = choose_node(nodes, 4);
  EXPECT_EQ(c->node, 1u);
  EXPECT_EQ(c->kind, RouteKind::prefix);
  // ...6 > 1 + 4 sends it to the least loaded node.
  nodes[1].inflight = 6;
  c = choose_node(nodes, 4);
  EXPECT_EQ(c->node, 2u);
  EXPECT_EQ(c->kind, RouteKind::balance);
  EXPECT_EQ(c->matched_tokens, 0u);
}

TEST(ClusterChooseNode, ColdRequestsGoToTheEmptiestCacheUnlessItIsOverloaded) {
  std::vector<NodeLoad> nodes = {{true, 0, 0, 30}, {true, 0, 0, 10}, {true, 1, 0, 0}};
  auto c = choose_node(nodes, 4);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->node, 2u);  // fewest indexed pages; 1 in flight is within the margin
  EXPECT_EQ(c->kind, RouteKind::cold);
  nodes[2].inflight = 5;  // 5 > 0 + 4: overloaded, the next emptiest
  c = choose_node(nodes, 4);
  EXPECT_EQ(c->node, 1u);
  nodes[0].indexed_pages = 10;  // equal pages: fewer in flight, then lower index
  nodes[0].inflight = 1;
  c = choose_node(nodes, 4);
  EXPECT_EQ(c->node, 1u);
  // Equal prefixes: the one with fewer in flight.
  nodes = {{true, 3, 32, 0}, {true, 1, 32, 0}, {true, 2, 16, 0}};
  c = choose_node(nodes, 4);
  EXPECT_EQ(c->node, 1u);
  EXPECT_EQ(c->kind, RouteKind::prefix);
}

TEST(ClusterChooseNode, DownNodesAreNeverChosen) {
  std::vector<NodeLoad> nodes = {{false, 0, 512, 0}, {true, 3, 0, 50}, {false, 0, 0, 0}};
  auto c = choose_node(nodes, 4);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->node, 1u);
  EXPECT_EQ(c->kind, RouteKind::cold);
  nodes[1].up = false;
  EXPECT_FALSE(choose_node(nodes, 4));
}

TEST(ClusterEndpoints, ParsesAndExplainsBadLists) {
  auto list = parse_endpoints("127.0.0.1:7001,localhost:7002");
  ASSERT_TRUE(list) << list.error().message;
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[1].host, "localhost");
  EXPECT_EQ((*list)[1].port, 7002);
  for (const char* bad : {"", "127.0.0.1", ":80", "h:0", "h:65536", "h:7x", "h:1,"}) {
    auto r = parse_endpoints(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ErrorCode::invalid_argument) << bad;
    EXPECT_NE(r.error().message.find("HOST:PORT"), std::string::npos) << bad << ": " << r.error().message;
  }
  auto twice = parse_endpoints("h:1,h:1");
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message.find("h:1 is listed twice"), std::string::npos) << twice.error().message;
  EXPECT_TRUE(parse_endpoint("127.0.0.1:0", true));
}

}  // namespace
}  // namespace arbor::cluster

// A cluster on loopback: three `arbor node` processes and an `arbor serve --nodes`
// router, driven over HTTP like a user would. Checked against each node's own figures
// (cluster::query_node_stats) and against a single in-process Runtime's greedy output.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "cache/page_key.hpp"
#include "cluster/cluster_test_util.hpp"
#include "runtime/cluster/cluster_backend.hpp"
#include "runtime/runtime_test_util.hpp"
#include "runtime/server_test_util.hpp"

namespace arbor::cluster {
namespace {

using server::test::eventually;
using server::test::Reply;
using server::test::request;

using test::kArbor;
using test::start_arbor;

using test::Cluster;

// A document of ~300 tokens whose first words already differ from every other's.
std::string document(int n) {
  const char* places[] = {"Veloria", "Quenmark", "Ostheim", "Larnach"};
  const std::string place = places[n % 4];
  std::string text = "Report " + std::to_string(n) + " on the harbor town of " + place + ".\n";
  for (int i = 0; i < 12; ++i)
    text += "In season " + std::to_string(i + 1) + ", " + place + " shipped " + std::to_string(30 + 7 * i + n) +
            " crates of amber and " + std::to_string(11 * i + 3 * n) + " barrels of salt to the northern isles. ";
  return text;
}

GenerateRequest chat_request(const std::string& doc, const std::string& question, int max_tokens) {
  GenerateRequest r;
  r.messages = {{"system", doc}, {"user", question}};
  r.sampling.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

std::string chat_body(const GenerateRequest& r) {
  nlohmann::json messages = nlohmann::json::array();
  for (const auto& m : r.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
  return nlohmann::json{{"model", "m"}, {"messages", messages}, {"max_tokens", r.sampling.max_tokens},
                        {"temperature", 0}}
      .dump();
}

struct Answer {
  int status = 0;
  std::string text, body;
  std::size_t cached_tokens = 0;
};

Answer ask(int port, const GenerateRequest& r, const std::string& key = "") {
  const Reply reply = request(port, "POST", "/v1/chat/completions", chat_body(r), key);
  Answer a{reply.status, "", reply.body, 0};
  if (reply.status != 200) return a;
  const auto j = reply.json();
  a.text = j["choices"][0]["message"]["content"];
  a.cached_tokens = j["usage"]["prompt_tokens_details"]["cached_tokens"];
  return a;
}

// The nodes whose runtime has served prompt tokens (of `tenant`, when given).
std::vector<std::size_t> serving_nodes(const Cluster& c, const std::string& tenant = "") {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < c.nodes.size(); ++i) {
    const auto s = c.stats(i);
    const bool served = tenant.empty() ? s.cache.prompt_tokens > 0
                                       : s.cache.tenants.contains(tenant) && s.cache.tenants.at(tenant).lookups > 0;
    if (served) out.push_back(i);
  }
  return out;
}

class ClusterProcesses : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kArbor)) GTEST_SKIP() << "build the 'arbor' target to run this test";
  }
};

// Requests sharing a document all go to the node that computed it, reuse its pages,
// and answer exactly what one runtime answers; a second document goes to another node.
TEST_F(ClusterProcesses, SharedPrefixesRouteToTheNodeHoldingThem) {
  Cluster cluster;
  ASSERT_TRUE(cluster.ready());
  const std::vector<std::string> questions = {"Which town is this about?", "What does it ship?",
                                              "How many seasons are listed?"};
  std::vector<Answer> answers;
  for (const auto& q : questions) answers.push_back(ask(cluster.router->port(), chat_request(document(1), q, 8)));
  for (const auto& a : answers) ASSERT_EQ(a.status, 200) << a.body;
  const auto holders = serving_nodes(cluster);
  ASSERT_EQ(holders.size(), 1u) << "every request over document 1 should have gone to one node";
  EXPECT_EQ(answers[0].cached_tokens, 0u);
  EXPECT_GT(answers[1].cached_tokens, 200u);  // the document's pages came from that node's cache
  EXPECT_GT(answers[2].cached_tokens, 200u);
  const auto held = cluster.stats(holders[0]).cache;
  EXPECT_EQ(held.cached_tokens, answers[1].cached_tokens + answers[2].cached_tokens);

  // Another document: a cold request, sent to an empty node.
  const Answer other = ask(cluster.router->port(), chat_request(document(2), questions[0], 8));
  ASSERT_EQ(other.status, 200) << other.body;
  const auto both = serving_nodes(cluster);
  ASSERT_EQ(both.size(), 2u);

  // The router's /metrics counts each decision per node: the holder got one cold
  // request then two prefix hits, the second document one cold request elsewhere.
  const Reply metrics = request(cluster.router->port(), "GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  auto line = [&](std::size_t node, const std::string& labels, const std::string& value) {
    return "arbor_cluster_routed_total{node=\"127.0.0.1:" + std::to_string(cluster.nodes[node]->port()) + "\"" +
           labels + "} " + value + "\n";
  };
  const std::size_t second = both[0] == holders[0] ? both[1] : both[0];
  EXPECT_NE(metrics.body.find(line(holders[0], ",route=\"prefix\"", "2")), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find(line(holders[0], ",route=\"cold\"", "1")), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find(line(second, ",route=\"cold\"", "1")), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find(line(second, ",route=\"prefix\"", "0")), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("arbor_cluster_node_up{node=\"127.0.0.1:" + std::to_string(cluster.nodes[second]->port()) +
                              "\"} 1\n"),
            std::string::npos)
      << metrics.body;
  // The same per node in /v1/cache/stats "nodes" (the dashboard's table), with the
  // node's own figures as the node reports them.
  const Reply stats = request(cluster.router->port(), "GET", "/v1/cache/stats");
  ASSERT_EQ(stats.status, 200);
  const auto nodes = stats.json()["nodes"];
  ASSERT_EQ(nodes.size(), cluster.nodes.size()) << stats.body;
  const auto& holder = nodes[holders[0]];
  EXPECT_EQ(holder["node"], "127.0.0.1:" + std::to_string(cluster.nodes[holders[0]]->port()));
  EXPECT_EQ(holder["up"], true);
  EXPECT_EQ(holder["routed"], nlohmann::json::parse(R"({"prefix":2,"balance":0,"cold":1})"));
  const auto now_held = cluster.stats(holders[0]).cache;
  EXPECT_EQ(holder["pages_total"], now_held.pages_total);
  EXPECT_DOUBLE_EQ(holder["hit_ratio"].get<double>(), now_held.hit_ratio);
  EXPECT_EQ(nodes[second]["routed"], nlohmann::json::parse(R"({"prefix":0,"balance":0,"cold":1})"));
  // Its "global" figures are the nodes' own, summed.
  const auto global = stats.json()["global"];
  std::uint64_t prompt = 0, cached = 0;
  int pages = 0;
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) {
    const auto s = cluster.stats(i).cache;
    prompt += s.prompt_tokens;
    cached += s.cached_tokens;
    pages += s.pages_total;
  }
  EXPECT_EQ(global["prompt_tokens"], prompt);
  EXPECT_EQ(global["cached_tokens"], cached);
  EXPECT_EQ(global["pages_total"], pages);
  EXPECT_DOUBLE_EQ(global["hit_ratio"].get<double>(), double(cached) / double(prompt));

  // The router's /v1/cache/tree: each node's tree, each entry naming its node.
  const Reply tree = request(cluster.router->port(), "GET", "/v1/cache/tree");
  ASSERT_EQ(tree.status, 200) << tree.body;
  const auto entries = tree.json()["nodes"];
  std::map<std::string, std::vector<nlohmann::json>> by_node;
  std::map<std::uint64_t, std::string> node_of;
  for (const auto& n : entries) {
    by_node[n["node"]].push_back(n);
    node_of[n["id"]] = n["node"];
  }
  ASSERT_EQ(by_node.size(), 2u) << tree.body;
  ASSERT_TRUE(by_node.contains(cluster.endpoint(holders[0]))) << tree.body;
  ASSERT_TRUE(by_node.contains(cluster.endpoint(second))) << tree.body;
  for (const auto& n : entries) {  // ids renumbered without mixing nodes
    if (n["parent"] != 0) {
      EXPECT_EQ(node_of[n["parent"]], n["node"]) << n.dump();
    }
  }

  // One runtime, the same requests in the same order: the same greedy answers, and the
  // same cache tree as the holder's part of the router's.
  auto runtime = arbor::testing::make_runtime();
  ASSERT_TRUE(runtime);
  for (std::size_t i = 0; i < questions.size(); ++i) {
    auto r = runtime->generate(chat_request(document(1), questions[i], 8));
    ASSERT_TRUE(r) << r.error().describe();
    EXPECT_EQ(answers[i].text, r->text) << "question " << i;
    EXPECT_EQ(answers[i].cached_tokens, r->cached_tokens) << "question " << i;
  }
  auto shape = [](std::uint64_t tokens, std::uint64_t depth, std::uint64_t hits, const std::string& snippet) {
    return std::to_string(depth) + "/" + std::to_string(tokens) + " hits " + std::to_string(hits) + ": " + snippet;
  };
  std::multiset<std::string> expected, routed;
  for (const auto& n : runtime->cache_tree("default", 256))
    expected.insert(shape(n.num_tokens, n.depth_tokens, n.hit_count, n.snippet));
  for (const auto& n : by_node[cluster.endpoint(holders[0])])
    routed.insert(shape(n["tokens"], n["depth"], n["hits"], n["snippet"]));
  EXPECT_GE(expected.size(), 2u);
  EXPECT_EQ(routed, expected);
  auto r = runtime->generate(chat_request(document(2), questions[0], 8));
  ASSERT_TRUE(r);
  EXPECT_EQ(other.text, r->text);
}

// The router routes each tenant by its own prefixes only: bob's request over alice's
// document is a cold request (the emptiest node), not a hit on alice's node. Then
// SIGTERM stops every process (a node that answered a router used to hang there).
TEST_F(ClusterProcesses, TenantsNeverRouteByEachOthersPrefixes) {
  Cluster cluster(R"({"keys": {"key-alice-0001": "alice", "key-bob-00001": "bob"}})");
  ASSERT_TRUE(cluster.ready());
  const int port = cluster.router->port();
  ASSERT_EQ(ask(port, chat_request(document(1), "Which town?", 4), "key-alice-0001").status, 200);
  ASSERT_EQ(ask(port, chat_request(document(1), "What cargo?", 4), "key-alice-0001").status, 200);
  ASSERT_EQ(ask(port, chat_request(document(2), "Which town?", 4), "key-alice-0001").status, 200);
  const auto alice = serving_nodes(cluster, "alice");
  ASSERT_EQ(alice.size(), 2u);
  const Answer bob = ask(port, chat_request(document(1), "Which town?", 4), "key-bob-00001");
  ASSERT_EQ(bob.status, 200) << bob.body;
  EXPECT_EQ(bob.cached_tokens, 0u);  // the nodes keep tenants apart too
  const auto bobs = serving_nodes(cluster, "bob");
  ASSERT_EQ(bobs.size(), 1u);
  EXPECT_NE(bobs[0], alice[0]);
  EXPECT_NE(bobs[0], alice[1]);

  // SIGTERM stops the router and every node that served (each exits 0, none hangs).
  cluster.router->terminate();
  EXPECT_EQ(cluster.router->wait_exit(60), 0);
  for (auto& node : cluster.nodes) node->terminate();
  for (auto& node : cluster.nodes) EXPECT_EQ(node->wait_exit(60), 0);
}

// A node killed while it generates: the request (nothing streamed yet) is sent again to
// another node and answers what one runtime answers; later requests avoid the dead node,
// and a node started again at its address rejoins.
TEST_F(ClusterProcesses, ANodeKilledMidRequestIsRetriedElsewhereRoutedAroundAndRejoins) {
  Cluster cluster;
  ASSERT_TRUE(cluster.ready());
  const int port = cluster.router->port();
  ASSERT_EQ(ask(port, chat_request(document(3), "Which town?", 4)).status, 200);
  const auto holders = serving_nodes(cluster);
  ASSERT_EQ(holders.size(), 1u);
  const std::size_t victim = holders[0];

  const auto long_request = chat_request(document(3), "Describe every season in detail.", 96);
  auto pending = std::async(std::launch::async, [&] { return ask(port, long_request); });
  ASSERT_TRUE(eventually([&] { return cluster.stats(victim).inflight > 0; }, 60));
  cluster.nodes[victim]->kill_now();
  const Answer retried = pending.get();
  ASSERT_EQ(retried.status, 200) << retried.body;
  std::vector<std::size_t> alive;
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i)
    if (i != victim) alive.push_back(i);
  std::size_t served = 0;
  for (auto i : alive) served += cluster.stats(i).cache.prompt_tokens > 0;
  EXPECT_EQ(served, 1u) << "the retry should have run on one of the other nodes";

  // Later requests, old document or new, succeed on the others.
  for (int d : {3, 4}) {
    const Answer later = ask(port, chat_request(document(d), "Which town?", 4));
    EXPECT_EQ(later.status, 200) << later.body;
  }

  auto runtime = arbor::testing::make_runtime();
  ASSERT_TRUE(runtime);
  auto r = runtime->generate(long_request);
  ASSERT_TRUE(r) << r.error().describe();
  EXPECT_EQ(retried.text, r->text);

  // A node started again at the dead one's address rejoins: with an empty cache it is
  // the emptiest node, so a cold request goes there once the router has reconnected.
  const int victim_port = cluster.nodes[victim]->port();
  cluster.nodes[victim] = start_arbor({"node", "--listen", "127.0.0.1:" + std::to_string(victim_port), "--model",
                                       ARBOR_DEFAULT_MODEL, "--threads", "2", "--kv-mem", "64"},
                                      "listening on 127.0.0.1:");
  ASSERT_TRUE(cluster.nodes[victim]);
  ASSERT_EQ(cluster.nodes[victim]->port(), victim_port);
  int doc = 10;
  EXPECT_TRUE(eventually(
      [&] {
        EXPECT_EQ(ask(port, chat_request(document(doc++), "Which town?", 2)).status, 200);
        return cluster.stats(victim).cache.prompt_tokens > 0;
      },
      60));
}

// A streamed request whose node dies after its first tokens went out cannot be
// retried unseen: the stream ends with an error event naming the node, then [DONE].
TEST_F(ClusterProcesses, ANodeKilledMidStreamEndsTheStreamWithAClearError) {
  Cluster cluster;
  ASSERT_TRUE(cluster.ready());
  auto body = nlohmann::json::parse(chat_body(chat_request(document(5), "Describe every season in detail.", 200)));
  body["stream"] = true;
  namespace net = boost::asio;
  namespace beast = boost::beast;
  net::io_context ioc;
  beast::tcp_stream stream(server::test::connect_loopback(ioc, cluster.router->port()));
  stream.expires_after(std::chrono::seconds(120));  // a hung router fails the test, never hangs it
  const std::string text = body.dump();
  const std::string head = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                           "Content-Length: " + std::to_string(text.size()) + "\r\n\r\n";
  net::write(stream, net::buffer(head + text));
  std::string got;
  char buf[4096];
  beast::error_code ec;
  while (got.find("\"content\":\"") == std::string::npos || got.find("data:", got.find("data:") + 1) == std::string::npos) {
    const std::size_t n = stream.read_some(net::buffer(buf), ec);
    ASSERT_FALSE(ec) << ec.message() << "\n" << got;
    got.append(buf, n);
  }
  std::vector<std::size_t> holders;  // the node generating it
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i)
    if (cluster.stats(i).inflight > 0) holders.push_back(i);
  ASSERT_EQ(holders.size(), 1u);
  cluster.nodes[holders[0]]->kill_now();
  while (got.find("[DONE]") == std::string::npos) {
    const std::size_t n = stream.read_some(net::buffer(buf), ec);
    if (ec) break;
    got.append(buf, n);
  }
  EXPECT_NE(got.find("[DONE]"), std::string::npos) << got;
  const std::string victim = "node 127.0.0.1:" + std::to_string(cluster.nodes[holders[0]]->port()) + " went down";
  EXPECT_NE(got.find(victim), std::string::npos) << got;
  EXPECT_NE(got.find("was not retried"), std::string::npos) << got;
  // The router goes on with the others.
  EXPECT_EQ(ask(cluster.router->port(), chat_request(document(5), "Which town?", 4)).status, 200);
}

// One per-node sample of the router's /metrics ("" labels: just node=), or -1.
double node_metric(const std::string& body, const std::string& name, int node_port, const std::string& more = "") {
  const std::string head = name + "{node=\"127.0.0.1:" + std::to_string(node_port) + "\"" + more + "} ";
  const auto at = body.find(head);
  return at == std::string::npos ? -1 : std::atof(body.c_str() + at + head.size());
}

// Nodes with small pools (28 pages of 16 tokens, under two documents): later documents
// evict earlier ones. The nodes' KV events keep the router's index equal to each
// node's cache, page for page, and a document resent after its pages were evicted is
// matched by the router exactly as far as the node still holds it (insert-on-send
// alone would still list every page).
TEST_F(ClusterProcesses, KvEventsKeepTheRoutersIndexEqualToEachNodesCache) {
  Cluster cluster("", 10);
  ASSERT_TRUE(cluster.ready());
  const int port = cluster.router->port();
  ASSERT_EQ(cluster.stats(0).cache.pages_total, 28u);
  for (int d = 0; d < 9; ++d) ASSERT_EQ(ask(port, chat_request(document(20 + d), "Which town?", 2)).status, 200);
  // Bounded wait (events may arrive after the replies): index pages == cached pages.
  auto settled = [&] {
    const std::string body = request(port, "GET", "/metrics").body;
    for (std::size_t i = 0; i < cluster.nodes.size(); ++i) {
      std::size_t cached = 0;
      for (const auto& [t, ts] : cluster.stats(i).cache.tenants) cached += ts.used_pages;
      if (node_metric(body, "arbor_cluster_node_indexed_pages", cluster.nodes[i]->port()) != double(cached))
        return false;
    }
    return true;
  };
  EXPECT_TRUE(eventually(settled, 60)) << request(port, "GET", "/metrics").body;
  std::uint64_t evictions = 0;
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) evictions += cluster.stats(i).cache.evictions;
  ASSERT_GT(evictions, 0u) << "the pools should have been too small for the documents";

  // The first document was evicted (in part or whole) by the later ones on its node.
  const std::string before = request(port, "GET", "/metrics").body;
  const Answer again = ask(port, chat_request(document(20), "Which town?", 2));
  ASSERT_EQ(again.status, 200);
  const std::string after = request(port, "GET", "/metrics").body;
  double matched = 0, kv_events = 0;
  for (const auto& n : cluster.nodes) {
    matched += node_metric(after, "arbor_cluster_matched_tokens_total", n->port()) -
               node_metric(before, "arbor_cluster_matched_tokens_total", n->port());
    kv_events += node_metric(after, "arbor_cluster_kv_events_total", n->port());
  }
  EXPECT_LT(again.cached_tokens, 300u) << "document 20 should have lost pages";
  EXPECT_EQ(matched, double(again.cached_tokens)) << "the router's match is what the node really had";
  EXPECT_GT(kv_events, 0);
}

// The router's GET /v1/kv_events: every node's events, each naming its node, numbered
// by the router without gaps; the stored pages of a request are the node's keys for its
// token ids; a killed node is announced by a cleared event naming it.
TEST_F(ClusterProcesses, TheRoutersKvEventStreamNamesEachEventsNode) {
  namespace net = server::test::net;
  namespace beast = server::test::beast;
  Cluster cluster;
  ASSERT_TRUE(cluster.ready());
  net::io_context ioc;
  beast::tcp_stream stream(server::test::connect_loopback(ioc, cluster.port()));
  net::write(stream, net::buffer(std::string("GET /v1/kv_events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")));
  std::string text;
  auto read_until = [&](auto done) { server::test::read_until(stream, text, [&](const std::string&) { return done(); }); };
  auto events = [&] {
    std::vector<nlohmann::json> out;
    for (const auto& p : server::test::sse_payloads(text)) out.push_back(nlohmann::json::parse(p, nullptr, false));
    return out;
  };
  read_until([&] { return text.find(": arbor kv events") != std::string::npos; });
  ASSERT_NE(text.find("200 OK"), std::string::npos) << text;

  ASSERT_EQ(ask(cluster.port(), chat_request(document(1), "Which town?", 2)).status, 200);
  const auto holders = serving_nodes(cluster);
  ASSERT_EQ(holders.size(), 1u);
  const std::string holder = cluster.endpoint(holders[0]);
  auto stored_from_holder = [&] {
    for (const auto& e : events())
      if (e.is_object() && e["type"] == "stored" && e["node"] == holder) return true;
    return false;
  };
  read_until(stored_from_holder);
  ASSERT_TRUE(stored_from_holder()) << text;
  std::optional<std::uint64_t> seq;
  for (const auto& e : events()) {
    ASSERT_TRUE(e.is_object()) << text;
    const auto n = e["seq"].get<std::uint64_t>();
    if (seq) {
      EXPECT_EQ(n, *seq + 1) << "the router numbers its stream without gaps";
    }
    seq = n;
    EXPECT_EQ(e["node"], holder) << "only the node that served the request stored pages";
    const auto event = kv_event_from_json(e);
    ASSERT_TRUE(event) << event.error().message;
    if (event->kind != KvEvent::Kind::stored) continue;
    // The node's keys: the chain from the parent (or the tenant's seed) over the token ids.
    cache::PageKey h = event->parent ? *event->parent : cache::page_key_seed(event->tenant);
    for (std::size_t p = 0; p < event->keys.size(); ++p) {
      h = cache::next_page_key(h, std::span(event->tokens).subspan(p * event->page_size, event->page_size));
      EXPECT_EQ(event->keys[p], h);
    }
  }

  cluster.nodes[holders[0]].reset();  // SIGKILL
  auto cleared_holder = [&] {
    for (const auto& e : events())
      if (e.is_object() && e["type"] == "cleared" && e["node"] == holder && e["tenant"] == "") return true;
    return false;
  };
  read_until(cleared_holder);
  EXPECT_TRUE(cleared_holder()) << text;
}

}  // namespace
}  // namespace arbor::cluster

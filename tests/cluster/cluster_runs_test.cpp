// Workflow runs on a cluster: three `arbor node` processes and an `arbor serve --nodes`
// router on loopback, driven over HTTP (POST /v1/runs). Checked against one in-process
// Runtime running the same workflows in the same order (greedy decoding) and against
// each node's own figures (cluster::query_node_stats).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "cluster/cluster_test_util.hpp"
#include "runtime/cluster/cluster_backend.hpp"
#include "runtime/runtime_test_util.hpp"
#include "runtime/server_test_util.hpp"

namespace arbor::cluster {
namespace {

using server::test::eventually;
using server::test::Reply;
using server::test::request;
using server::test::sse_payloads;

using test::kArbor;
using test::start_arbor;

constexpr const char* kAlice = "key-alice-0001";
constexpr const char* kBob = "key-bob-00001";
constexpr const char* kAdmin = "key-admin-001";

// Three nodes and a router whose workflow_dir is the examples' folder (the nodes get
// the prefix files' bytes from the router) and whose keys are alice's and bob's.
struct Cluster : test::Cluster {
  Cluster()
      : test::Cluster(nlohmann::json{{"admin_key", kAdmin},
                                     {"keys", {{kAlice, "alice"}, {kBob, "bob"}}},
                                     {"workflow_dir", arbor::testing::kExamples}}
                          .dump()) {}
  // The nodes whose runtime has served prompt tokens of `tenant`.
  std::vector<std::size_t> serving(const std::string& tenant) const {
    std::vector<std::size_t> out;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (!nodes[i] || nodes[i]->port() <= 0) continue;
      const auto s = stats(i).cache;
      if (s.tenants.contains(tenant) && s.tenants.at(tenant).lookups > 0) out.push_back(i);
    }
    return out;
  }
  // The node running a run now (a node's stats count its runs), or nullopt.
  std::optional<std::size_t> running() const {
    for (std::size_t i = 0; i < nodes.size(); ++i)
      if (stats(i).runs > 0) return i;
    return std::nullopt;
  }
};

const std::map<std::string, std::string> kInputs = {
    {"questions", R"(["Who built the first transistor?","What is a MOSFET?"])"}};

nlohmann::json run_body(const std::string& workflow) {
  return {{"workflow", nlohmann::json::parse(workflow)},
          {"inputs", {{"questions", nlohmann::json::parse(kInputs.at("questions"))}}}};
}

// Posts a run; its id ("" when refused, the reply in `refused`).
std::string post_run(int port, const std::string& workflow, const std::string& key, Reply* refused = nullptr) {
  const Reply r = request(port, "POST", "/v1/runs", run_body(workflow).dump(), key);
  if (r.status != 202) {
    if (refused) *refused = r;
    ADD_FAILURE() << r.status << " " << r.body;
    return "";
  }
  return r.json()["id"];
}

// Follows the run's events to their end (the stream closes after [DONE]); the payloads.
std::vector<nlohmann::json> follow(int port, const std::string& id, const std::string& key) {
  const Reply r = request(port, "GET", "/v1/runs/" + id + "/events", "", key);
  EXPECT_EQ(r.status, 200) << r.body;
  std::vector<nlohmann::json> out;
  for (const auto& p : sse_payloads(r.body))
    out.push_back(p == "[DONE]" ? nlohmann::json("[DONE]") : nlohmann::json::parse(p));
  return out;
}

nlohmann::json run_document(int port, const std::string& id, const std::string& key) {
  const Reply r = request(port, "GET", "/v1/runs/" + id, "", key);
  EXPECT_EQ(r.status, 200) << r.body;
  return r.json();
}

RunResult run_here(Runtime& rt, const std::string& workflow, const std::string& tenant) {
  auto h = rt.start(workflow, {.inputs = kInputs,
                               .workflow_is_text = true,
                               .tenant = tenant,
                               .documents = DocumentAccess::confined_to(arbor::testing::kExamples)});
  EXPECT_TRUE(h) << (h ? "" : h.error().describe());
  return h ? h->wait() : RunResult{};
}

// The run document's agents equal the reference run's: outputs and cache figures.
void expect_same_agents(const nlohmann::json& doc, const RunResult& reference, const std::string& what) {
  ASSERT_EQ(doc["agents"].size(), reference.agents.size()) << what << "\n" << doc.dump();
  for (std::size_t i = 0; i < reference.agents.size(); ++i) {
    const auto& a = doc["agents"][i];
    const auto& r = reference.agents[i];
    EXPECT_EQ(a["id"], r.id) << what;
    EXPECT_EQ(a["status"], "ok") << what << " " << r.id << ": " << a.dump();
    EXPECT_EQ(a["output"], r.output) << what << " " << r.id;
    EXPECT_EQ(a["prompt_tokens"], r.prompt_tokens) << what << " " << r.id;
    EXPECT_EQ(a["cached_tokens"], r.cached_tokens) << what << " " << r.id;
  }
}

std::size_t metric(const std::string& metrics, const std::string& line_start) {
  const auto at = metrics.find(line_start + " ");
  if (at == std::string::npos) return std::size_t(-1);
  return std::stoul(metrics.substr(at + line_start.size() + 1));
}

class ClusterRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kArbor)) GTEST_SKIP() << "build the 'arbor' target to run this test";
  }
};

// A run posted to the router runs on one node and answers what one runtime answers;
// the same workflow again goes to the same node and reads its shared prefix from that
// node's cache (exactly the cached tokens one runtime reports); another tenant's run of
// it is routed by its own prefixes only (a cold run elsewhere, none of alice's pages)
// and cannot see alice's run.
TEST_F(ClusterRuns, ARunGoesToOneNodeAndASecondReusesItsPrefixThere) {
  Cluster cluster;
  ASSERT_TRUE(cluster.ready());
  const std::string workflow = arbor::testing::example_with_max_tokens("research_team", 4);

  const std::string first = post_run(cluster.port(), workflow, kAlice);
  ASSERT_FALSE(first.empty());
  const auto events = follow(cluster.port(), first, kAlice);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.front()["type"], "run_started");
  EXPECT_EQ(events.back(), "[DONE]");
  const auto& finished = events[events.size() - 2];
  EXPECT_EQ(finished["type"], "run_finished");
  EXPECT_EQ(finished["status"], "ok");
  EXPECT_EQ(finished["run_id"], first);
  EXPECT_TRUE(finished.contains("cache")) << finished.dump();
  int agents_started = 0;
  for (const auto& e : events) agents_started += e.is_object() && e["type"] == "agent_started";
  EXPECT_EQ(agents_started, 3);  // the lead and two researchers
  const auto holders = cluster.serving("alice");
  ASSERT_EQ(holders.size(), 1u) << "all of a run's agents run on one node";

  const std::string second = post_run(cluster.port(), workflow, kAlice);
  ASSERT_FALSE(second.empty());
  EXPECT_NE(second, first);
  follow(cluster.port(), second, kAlice);
  EXPECT_EQ(cluster.serving("alice"), holders) << "the second run should have gone to the prefix's node";

  const auto doc1 = run_document(cluster.port(), first, kAlice);
  const auto doc2 = run_document(cluster.port(), second, kAlice);
  EXPECT_EQ(doc1["status"], "ok");
  EXPECT_EQ(doc1["tenant"], "alice");
  EXPECT_EQ(doc1["run_id"], first);
  EXPECT_EQ(doc2["status"], "ok");
  EXPECT_GT(doc2["totals"]["cached_tokens"].get<std::size_t>(), doc1["totals"]["cached_tokens"].get<std::size_t>());

  // One runtime, the same runs in the same order: the same outputs and cache figures.
  auto runtime = arbor::testing::make_runtime();
  ASSERT_TRUE(runtime);
  const RunResult ref1 = run_here(*runtime, workflow, "alice");
  const RunResult ref2 = run_here(*runtime, workflow, "alice");
  expect_same_agents(doc1, ref1, "first run");
  expect_same_agents(doc2, ref2, "second run");

  // bob: the same workflow, routed by bob's prefixes only (none): a cold run on
  // another node, nothing cached; alice's runs stay hers.
  const std::string bobs = post_run(cluster.port(), workflow, kBob);
  ASSERT_FALSE(bobs.empty());
  follow(cluster.port(), bobs, kBob);
  const auto bob_doc = run_document(cluster.port(), bobs, kBob);
  EXPECT_EQ(bob_doc["status"], "ok");
  EXPECT_EQ(bob_doc["tenant"], "bob");
  // Only its own warm-up's pages (as alice's first run): none of alice's.
  EXPECT_EQ(bob_doc["totals"]["cached_tokens"], doc1["totals"]["cached_tokens"]);
  const auto bob_nodes = cluster.serving("bob");
  ASSERT_EQ(bob_nodes.size(), 1u);
  EXPECT_NE(bob_nodes[0], holders[0]);
  EXPECT_EQ(request(cluster.port(), "GET", "/v1/runs/" + first, "", kBob).status, 404);

  // The router's /metrics counts runs per node and decision: alice's node one cold run
  // then one prefix hit, bob's node one cold run.
  const std::string metrics = request(cluster.port(), "GET", "/metrics", "", kAdmin).body;
  auto routed = [&](std::size_t node, const char* route) {
    return metric(metrics,
                  "arbor_cluster_runs_routed_total{node=\"" + cluster.endpoint(node) + "\",route=\"" + route + "\"}");
  };
  EXPECT_EQ(routed(holders[0], "cold"), 1u) << metrics;
  EXPECT_EQ(routed(holders[0], "prefix"), 1u) << metrics;
  EXPECT_EQ(routed(bob_nodes[0], "cold"), 1u) << metrics;
  EXPECT_EQ(routed(bob_nodes[0], "prefix"), 0u) << metrics;
}

// An invalid workflow is refused by the router with every diagnostic, exactly as one
// runtime (a single `arbor serve`) refuses it, before any node sees it.
TEST_F(ClusterRuns, AnInvalidWorkflowIsA400WithEveryDiagnostic) {
  Cluster cluster;
  ASSERT_TRUE(cluster.ready());
  auto broken = nlohmann::json::parse(arbor::testing::example_with_max_tokens("research_team", 4));
  broken["agents"][0]["prefix"] = "backgruond";
  broken["defaults"]["generation"]["temperature"] = 900;
  auto runtime = arbor::testing::make_runtime();
  ASSERT_TRUE(runtime);
  auto expected = runtime->start(broken.dump(), {.inputs = kInputs,
                                                 .workflow_is_text = true,
                                                 .tenant = "alice",
                                                 .documents = DocumentAccess::confined_to(arbor::testing::kExamples)});
  ASSERT_FALSE(expected);
  const Reply r = request(cluster.port(), "POST", "/v1/runs", run_body(broken.dump()).dump(), kAlice);
  ASSERT_EQ(r.status, 400) << r.body;
  const auto j = r.json();
  EXPECT_EQ(j["error"]["code"], "invalid_workflow") << r.body;
  EXPECT_EQ(j["error"]["message"], expected.error().message);
  EXPECT_NE(r.body.find("backgruond"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("temperature"), std::string::npos) << r.body;

  auto unknown_tool = nlohmann::json::parse(arbor::testing::example_with_max_tokens("research_team", 4));
  unknown_tool["agents"][0]["tools"] = {"calculater"};
  const Reply t = request(cluster.port(), "POST", "/v1/runs", run_body(unknown_tool.dump()).dump(), kAlice);
  EXPECT_EQ(t.status, 400) << t.body;
  EXPECT_NE(t.body.find("calculater"), std::string::npos) << t.body;
  for (std::size_t i = 0; i < cluster.nodes.size(); ++i) EXPECT_EQ(cluster.stats(i).cache.prompt_tokens, 0u);
}

// DELETE reaches the run's node. A node killed mid-run: with max_retries 0 the run
// fails with an error naming the node (status failed, a run_finished event carrying
// it), and the router still answers for it; with retries left it runs again, whole, on
// another node and answers what one runtime answers.
TEST_F(ClusterRuns, CancelReachesTheNodeAndAKilledNodesRunFailsOrIsRetried) {
  Cluster cluster;
  ASSERT_TRUE(cluster.ready());
  auto long_run = nlohmann::json::parse(arbor::testing::example_with_max_tokens("research_team", 200));
  long_run["defaults"].erase("timeout_ms");  // outputs are checked, not deadlines: a busy machine must not fail it

  // Cancel.
  const std::string cancelled = post_run(cluster.port(), long_run.dump(), kAlice);
  ASSERT_FALSE(cancelled.empty());
  ASSERT_TRUE(eventually([&] { return cluster.running().has_value(); }, 60));
  EXPECT_EQ(request(cluster.port(), "DELETE", "/v1/runs/" + cancelled, "", kAlice).status, 200);
  follow(cluster.port(), cancelled, kAlice);
  EXPECT_EQ(run_document(cluster.port(), cancelled, kAlice)["status"], "cancelled");
  EXPECT_TRUE(eventually([&] { return !cluster.running().has_value(); }, 60));

  // max_retries 0: fails, naming the node.
  auto no_retry = long_run;
  no_retry["defaults"]["max_retries"] = 0;
  const std::string failing = post_run(cluster.port(), no_retry.dump(), kAlice);
  ASSERT_FALSE(failing.empty());
  std::optional<std::size_t> victim;
  ASSERT_TRUE(eventually([&] { return (victim = cluster.running()).has_value(); }, 60));
  const std::string victim_at = cluster.endpoint(*victim);
  cluster.nodes[*victim]->kill_now();
  const auto events = follow(cluster.port(), failing, kAlice);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  const auto& finished = events[events.size() - 2];
  EXPECT_EQ(finished["type"], "run_finished");
  EXPECT_EQ(finished["status"], "failed");
  const std::string why = finished.value("text", "");
  EXPECT_NE(why.find("node " + victim_at + " went down"), std::string::npos) << why;
  EXPECT_NE(why.find("max_retries 0"), std::string::npos) << why;
  const auto failed_doc = run_document(cluster.port(), failing, kAlice);
  EXPECT_EQ(failed_doc["status"], "failed");
  EXPECT_EQ(failed_doc["error"], why);

  // Retries left (research_team's max_retries 1): run again on another node.
  const std::string retried = post_run(cluster.port(), long_run.dump(), kAlice);
  ASSERT_FALSE(retried.empty());
  std::optional<std::size_t> second_victim;
  ASSERT_TRUE(eventually(
      [&] {
        for (std::size_t i = 0; i < cluster.nodes.size(); ++i)
          if (i != *victim && cluster.stats(i).runs > 0) second_victim = i;
        return second_victim.has_value();
      },
      60));
  cluster.nodes[*second_victim]->kill_now();
  const auto retried_events = follow(cluster.port(), retried, kAlice);
  const auto retried_doc = run_document(cluster.port(), retried, kAlice);
  EXPECT_EQ(retried_doc["status"], "ok") << retried_doc.dump();
  std::size_t last = 0;
  while (last == *victim || last == *second_victim) ++last;
  // The stream marks the restart: a second run_started saying where and why.
  std::vector<std::string> starts;
  for (const auto& e : retried_events)
    if (e.is_object() && e["type"] == "run_started") starts.push_back(e.value("text", ""));
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[0], "");
  EXPECT_EQ(starts[1], "attempt 2 of 2, on " + cluster.endpoint(last) +
                           ": the run started again, every agent from the beginning (" +
                           cluster.endpoint(*second_victim) + " went down)");
  const std::string metrics = request(cluster.port(), "GET", "/metrics", "", kAdmin).body;
  EXPECT_EQ(metric(metrics, "arbor_cluster_runs_retried_total{node=\"" + cluster.endpoint(last) + "\"}"), 1u)
      << metrics;

  auto runtime = arbor::testing::make_runtime();
  ASSERT_TRUE(runtime);
  const RunResult reference = run_here(*runtime, long_run.dump(), "alice");
  ASSERT_EQ(retried_doc["agents"].size(), reference.agents.size());
  for (std::size_t i = 0; i < reference.agents.size(); ++i)
    EXPECT_EQ(retried_doc["agents"][i]["output"], reference.agents[i].output) << reference.agents[i].id;
}

}  // namespace
}  // namespace arbor::cluster

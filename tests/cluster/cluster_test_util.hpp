// Shared by the cluster tests that run the `arbor` binary as processes (nodes, routers).
#pragma once

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "runtime/cli/child_process.hpp"
#include "runtime/cluster/cluster_backend.hpp"

namespace arbor::cluster::test {

inline const std::string kArbor = std::string(ARBOR_BINARY_DIR) + "/arbor";

// `arbor <args>`, whose first stdout line holds "<marker><port>"; SIGKILLed and reaped
// when it goes, so a failing test leaves nothing running. Null (a test failure saying
// why) when it did not start.
inline std::unique_ptr<cli::ChildProcess> start_arbor(std::vector<std::string> args, const std::string& marker) {
  args.insert(args.begin(), kArbor);
  auto child = cli::ChildProcess::start({.argv = std::move(args), .port_marker = marker});
  EXPECT_TRUE(child) << child.error().describe();
  return child ? std::make_unique<cli::ChildProcess>(std::move(*child)) : nullptr;
}

// Three `arbor node` processes and an `arbor serve --nodes` router on loopback (each
// node with --threads 2 and a `node_kv_mb` MiB KV pool); `router_config` (JSON text,
// "" = none) is the router's --config. Everything is SIGKILLed when it goes.
struct Cluster {
  std::vector<std::unique_ptr<cli::ChildProcess>> nodes;
  std::unique_ptr<cli::ChildProcess> router;
  std::string config_path;

  explicit Cluster(const std::string& router_config = "", int node_kv_mb = 64) {
    std::string list;
    for (int i = 0; i < 3; ++i) {
      nodes.push_back(start_arbor({"node", "--listen", "127.0.0.1:0", "--model", ARBOR_DEFAULT_MODEL, "--threads", "2",
                                   "--kv-mem", std::to_string(node_kv_mb)},
                                  "listening on 127.0.0.1:"));
      if (!nodes.back()) return;  // not ready()
      list += (i ? "," : "") + std::string("127.0.0.1:") + std::to_string(nodes.back()->port());
    }
    std::vector<std::string> args = {"serve", "--port", "0", "--nodes", list, "--model", ARBOR_DEFAULT_MODEL};
    if (!router_config.empty()) {
      static std::atomic<int> counter{0};
      config_path = std::string(ARBOR_BINARY_DIR) + "/cluster_test_" + std::to_string(getpid()) + "_" +
                    std::to_string(counter++) + ".json";
      std::ofstream(config_path) << router_config;
      args.push_back("--config");
      args.push_back(config_path);
    }
    router = start_arbor(args, "http://127.0.0.1:");
  }
  ~Cluster() {
    router.reset();
    nodes.clear();
    if (!config_path.empty()) std::filesystem::remove(config_path);
  }
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  bool ready() const {
    for (const auto& n : nodes)
      if (!n) return false;
    return router != nullptr;
  }
  int port() const { return router->port(); }  // the router's HTTP port
  Endpoint node(std::size_t i) const { return {"127.0.0.1", static_cast<std::uint16_t>(nodes[i]->port())}; }
  std::string endpoint(std::size_t i) const { return node(i).text(); }
  // The node's own figures, asked directly.
  NodeStats stats(std::size_t i) const {
    auto s = query_node_stats(node(i));
    EXPECT_TRUE(s) << s.error().describe();
    return s ? *s : NodeStats{};
  }
};

}  // namespace arbor::cluster::test

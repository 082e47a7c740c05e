// The cluster's mutual TLS (runtime/cluster/cluster_tls.hpp, net_config.cpp): the
// up-front check of the three files, and an `arbor node` process with TLS that serves
// a router holding a certificate of its CA and refuses every other peer, each refusal
// saying what to fix. The test PKI: tests/data/cluster_tls/make_pki.sh.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>

#include "runtime/cluster/cluster_backend.hpp"
#include "runtime/cluster/cluster_tls.hpp"
#include "cluster/cluster_test_util.hpp"

namespace arbor::cluster {
namespace {

const std::string kPki = std::string(ARBOR_SOURCE_DIR) + "/tests/data/cluster_tls/";

ClusterTls member() { return {kPki + "member.pem", kPki + "member.key", kPki + "cluster-ca.pem"}; }
ClusterTls rogue() { return {kPki + "rogue.pem", kPki + "rogue.key", kPki + "other-ca.pem"}; }

std::string error_of(const Result<void>& r) { return r ? "" : r.error().message; }

TEST(ClusterTls, EachBadSetUpIsRefusedNamingTheFlagAndTheFix) {
  EXPECT_TRUE(check_cluster_tls({}));  // no TLS at all
  EXPECT_TRUE(check_cluster_tls(member())) << error_of(check_cluster_tls(member()));
  EXPECT_TRUE(check_cluster_tls(rogue()));  // valid for its own CA

  auto half = member();
  half.ca.clear();
  EXPECT_NE(error_of(check_cluster_tls(half)).find("go together"), std::string::npos);

  auto missing = member();
  missing.key = kPki + "absent.key";
  EXPECT_EQ(error_of(check_cluster_tls(missing)), "--cluster-key " + missing.key + ": cannot read it");

  auto swapped = member();
  swapped.key = swapped.certificate;  // a certificate given as the key
  EXPECT_NE(error_of(check_cluster_tls(swapped)).find("--cluster-key " + swapped.key + ": not an unencrypted PEM"),
            std::string::npos)
      << error_of(check_cluster_tls(swapped));

  auto mismatched = member();
  mismatched.key = kPki + "rogue.key";
  EXPECT_NE(error_of(check_cluster_tls(mismatched)).find("is not the key of the certificate"), std::string::npos)
      << error_of(check_cluster_tls(mismatched));

  auto foreign = rogue();
  foreign.ca = kPki + "cluster-ca.pem";
  const std::string why = error_of(check_cluster_tls(foreign));
  EXPECT_NE(why.find("does not verify against --cluster-ca"), std::string::npos) << why;
  EXPECT_NE(why.find("use a certificate that CA signed"), std::string::npos) << why;
}

std::unique_ptr<cli::ChildProcess> start_node(const ClusterTls& tls) {
  std::vector<std::string> args = {"node", "--listen", "127.0.0.1:0", "--model", ARBOR_DEFAULT_MODEL,
                                   "--threads", "1", "--kv-mem", "16"};
  if (tls.enabled())
    args.insert(args.end(), {"--cluster-cert", tls.certificate, "--cluster-key", tls.key, "--cluster-ca", tls.ca});
  return test::start_arbor(args, "listening on 127.0.0.1:");
}

Result<std::unique_ptr<ClusterBackend>> router(const cli::ChildProcess& node, const ClusterTls& tls) {
  ClusterOptions options;
  options.nodes = {{"127.0.0.1", static_cast<std::uint16_t>(node.port())}};
  options.model_path = ARBOR_DEFAULT_MODEL;
  options.tls = tls;
  return ClusterBackend::connect(std::move(options));
}

std::string connect_error(const cli::ChildProcess& node, const ClusterTls& tls) {
  auto r = router(node, tls);
  return r ? "" : r.error().message;
}

TEST(ClusterTls, ATlsNodeServesARouterOfItsCaAndRefusesEveryOtherPeer) {
  auto node = start_node(member());
  ASSERT_TRUE(node);
  EXPECT_NE(node->first_line().find("mutual TLS"), std::string::npos) << node->first_line();

  // A router with a certificate of the cluster's CA: a generation runs on the node.
  {
    auto backend = router(*node, member());
    ASSERT_TRUE(backend) << backend.error().describe();
    GenerateRequest request;
    request.messages = {{"user", "Name a colour."}};
    request.sampling.max_tokens = 4;
    request.sampling.temperature = 0;
    std::promise<Result<GenerateResult>> done;
    auto outcome = done.get_future();
    auto g = (*backend)->start_generate(request, {}, [&](const Result<GenerateResult>& r) { done.set_value(r); });
    ASSERT_TRUE(g) << g.error().describe();
    ASSERT_EQ(outcome.wait_for(std::chrono::seconds(120)), std::future_status::ready);
    auto result = outcome.get();
    ASSERT_TRUE(result) << result.error().describe();
    EXPECT_EQ(result->generated_tokens, 4u);
    auto stats = query_node_stats({"127.0.0.1", static_cast<std::uint16_t>(node->port())}, member());
    ASSERT_TRUE(stats) << stats.error().describe();
    EXPECT_EQ(stats->cache.prompt_tokens, result->prompt_tokens);
  }

  // Without TLS, or with a certificate another CA signed: refused at the handshake.
  const std::string plain = connect_error(*node, {});
  EXPECT_NE(plain.find("the node requires TLS: give the router --cluster-cert"), std::string::npos) << plain;
  // The node's refusal reaches CAF as a failed handshake or, when the node has closed the
  // socket first (a loaded machine), as a failed connection: each names the CA to fix.
  const std::string foreign = connect_error(*node, rogue());
  EXPECT_TRUE(foreign.find("the node refused this router's certificate") != std::string::npos ||
              foreign.find("the same --cluster-ca as this router") != std::string::npos)
      << foreign;
  auto probe = query_node_stats({"127.0.0.1", static_cast<std::uint16_t>(node->port())});
  EXPECT_FALSE(probe);

  // A TLS router cannot reach a node without TLS either. CAF reports it one of two ways
  // (the plain node drops the TLS hello, or the connection fails): each says what to fix.
  auto plain_node = start_node({});
  ASSERT_TRUE(plain_node);
  for (int attempt = 0; attempt < 4; ++attempt) {
    const std::string mixed = connect_error(*plain_node, member());
    const bool named = mixed.find("or runs without TLS") != std::string::npos ||
                       mixed.find("a node without TLS cannot be reached over it") != std::string::npos;
    EXPECT_TRUE(named) << mixed;
  }
}

}  // namespace
}  // namespace arbor::cluster

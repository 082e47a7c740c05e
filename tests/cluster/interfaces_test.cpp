// The cluster's typed interfaces (runtime/cluster/interfaces.hpp). The compile-time
// half: each handle takes exactly the protocol's messages (wire.hpp), answers each with
// the declared type, and leaves out the actors' own messages. The run-time half, over
// loopback in this process: the real node actor, published, answers a router that
// connects with remote_actor<NodeActor>, and a peer of another interface is refused
// with an error that says what to run.
#include "runtime/cluster/interfaces.hpp"

#include <gtest/gtest.h>

#include <type_traits>

#include "actors/interfaces_test_util.hpp"
#include "runtime/cluster/cluster_backend.hpp"
#include "runtime/cluster/net_config.hpp"
#include "runtime/cluster/node_actor.hpp"
#include "runtime/runtime_test_util.hpp"

namespace arbor::cluster {
namespace {

using actors::testing::answers;
using actors::testing::is_part_of;
using actors::testing::takes;

using u64 = std::uint64_t;

static_assert(answers<NodeActor, std::string, node_info_atom>);
static_assert(answers<NodeActor, std::string, node_stats_atom>);
static_assert(answers<NodeActor, std::string, node_tree_atom, std::string, u64>);  // (tenant, max_nodes)
static_assert(answers<NodeActor, void, node_gen_atom, u64, std::string, ReplyListener, bool>);
static_assert(answers<NodeActor, void, node_cancel_atom, u64, ReplyListener>);
static_assert(answers<NodeActor, void, node_run_atom, u64, std::string, RunListener>);
static_assert(answers<NodeActor, void, node_run_cancel_atom, u64, RunListener>);
static_assert(caf::detail::tl_size<caf::signatures_of_t<NodeActor>>::value == 8);
static_assert(!takes<NodeActor, node_run_atom, u64, std::string, ReplyListener>);  // a run's events need a RunListener
static_assert(answers<RunListener, void, node_run_event_atom, u64, std::string>);
static_assert(answers<RunListener, void, node_run_done_atom, u64, std::string>);
static_assert(caf::detail::tl_size<caf::signatures_of_t<RunListener>>::value == 2);
static_assert(!is_part_of<RunListener, NodeActor>);
static_assert(answers<NodeActor, void, node_kv_subscribe_atom, KvListener, u64>);
static_assert(!takes<NodeActor, node_kv_subscribe_atom, caf::actor, u64>);
static_assert(answers<KvListener, void, node_kv_atom, u64, std::string>);
static_assert(caf::detail::tl_size<caf::signatures_of_t<KvListener>>::value == 1);
// The requester is a ReplyListener, not any actor; the node's own stats answer and
// what it sends back are not part of its interface.
static_assert(!takes<NodeActor, node_gen_atom, u64, std::string, caf::actor, bool>);
static_assert(!takes<NodeActor, node_cancel_atom, u64, caf::actor>);
static_assert(!takes<NodeActor, node_gen_atom, u64, std::string, ReplyListener>);
static_assert(!takes<NodeActor, node_done_atom, u64, std::string>);
static_assert(!takes<NodeActor, node_piece_atom, u64, std::string>);
static_assert(!answers<NodeActor, NodeStats, node_stats_atom>);  // JSON text, not the struct

static_assert(answers<ReplyListener, void, node_piece_atom, u64, std::string>);
static_assert(answers<ReplyListener, void, node_done_atom, u64, std::string>);
static_assert(caf::detail::tl_size<caf::signatures_of_t<ReplyListener>>::value == 2);
static_assert(!takes<ReplyListener, node_gen_atom, u64, std::string, ReplyListener, bool>);
static_assert(!takes<ReplyListener, node_info_atom>);
static_assert(!is_part_of<ReplyListener, NodeActor>);
static_assert(!is_part_of<NodeActor, ReplyListener>);

// spawn_node_actor hands out only the published interface.
static_assert(std::is_same_v<decltype(spawn_node_actor(std::declval<caf::actor_system&>(), std::declval<Runtime&>(),
                                                       std::declval<const NodeInfo&>())),
                             NodeActor>);

const std::string kLoopback = "127.0.0.1";

// A system that publishes one actor on a free loopback port; the actor is sent an exit
// before the system goes.
template <class Handle>
struct Published {
  NetConfig config;  // outlives the system
  caf::actor_system system{config};
  Handle actor;
  std::uint16_t port = 0;
  ~Published() {
    if (actor) caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  }
  void publish(Handle h) {
    actor = std::move(h);
    auto p = system.middleman().publish(actor, 0, kLoopback.c_str());
    ASSERT_TRUE(p) << system.render(p.error());
    port = *p;
  }
};

TEST(ClusterInterfaces, ThePublishedNodeActorAnswersARouterThatConnectsWithItsInterface) {
  auto runtime = testing::make_runtime();
  Published<NodeActor> node;
  node.publish(spawn_node_actor(node.system, *runtime, node_info(*runtime)));
  ASSERT_NE(node.port, 0);
  auto stats = query_node_stats(Endpoint{kLoopback, node.port});  // remote_actor<NodeActor>
  ASSERT_TRUE(stats) << stats.error().describe();
  EXPECT_EQ(stats->cache.pages_total, runtime->cache_stats().pages_total);
  EXPECT_EQ(stats->inflight, 0u);

  // CAF 0.17 refuses an untyped handle to a typed published actor.
  NetConfig config;
  caf::actor_system client{config};
  auto untyped = client.middleman().remote_actor(kLoopback, node.port);
  ASSERT_FALSE(untyped);
  EXPECT_EQ(untyped.error(), caf::sec::unexpected_actor_messaging_interface);
}

std::string mismatch_error(std::uint16_t port) {
  const std::string at = kLoopback + ":" + std::to_string(port);
  return "the process at " + at +
         " is not an `arbor node` of this arbor build (its actor interface differs from this router's); run this "
         "build's `arbor node --listen " +
         at + "` there";
}

// A node as it was before the interface was typed: the same messages, untyped.
TEST(ClusterInterfaces, ARouterRefusesAnUntypedPeerWithAClearError) {
  Published<caf::actor> old;
  old.publish(old.system.spawn([]() -> caf::behavior {
    return {[](node_stats_atom) { return std::string("{}"); }, [](node_info_atom) { return std::string("{}"); }};
  }));
  ASSERT_NE(old.port, 0);
  auto stats = query_node_stats(Endpoint{kLoopback, old.port});
  ASSERT_FALSE(stats);
  EXPECT_EQ(stats.error().code, ErrorCode::unsupported);
  EXPECT_EQ(stats.error().message, mismatch_error(old.port));
}

// A typed peer whose interface differs in one message (no cancel).
using OtherActor = caf::typed_actor<caf::replies_to<node_info_atom>::with<std::string>,
                                    caf::replies_to<node_stats_atom>::with<std::string>,
                                    caf::reacts_to<node_gen_atom, u64, std::string, ReplyListener, bool>>;

TEST(ClusterInterfaces, ARouterRefusesAPeerOfAnotherTypedInterfaceWithAClearError) {
  Published<OtherActor> other;
  other.publish(other.system.spawn([]() -> OtherActor::behavior_type {
    return {[](node_info_atom) { return std::string("{}"); }, [](node_stats_atom) { return std::string("{}"); },
            [](node_gen_atom, u64, const std::string&, const ReplyListener&, bool) {}};
  }));
  ASSERT_NE(other.port, 0);
  auto stats = query_node_stats(Endpoint{kLoopback, other.port});
  ASSERT_FALSE(stats);
  EXPECT_EQ(stats.error().message, mismatch_error(other.port));
}

}  // namespace
}  // namespace arbor::cluster

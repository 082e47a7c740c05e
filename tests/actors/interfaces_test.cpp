// The actors' typed interfaces (actors/interfaces.hpp). The compile-time half: each
// handle takes exactly the messages its actor handles, answers each with the declared
// type, leaves out the actor's own timers, and converts without a cast to the narrower
// interfaces it serves; CAF's send() and request() refuse to compile with any message
// for which `takes` below is false. The run-time half: the handle spawn_cache_actor
// returns drives the real actor without a cast.
#include "actors/interfaces.hpp"

#include <gtest/gtest.h>

#include <type_traits>

#include "actors/cache_actor.hpp"
#include "actors/config.hpp"
#include "actors_test_util.hpp"
#include "interfaces_test_util.hpp"

namespace arbor::actors {
namespace {

using actors::testing::answers;
using actors::testing::is_part_of;
using actors::testing::takes;

static_assert(answers<CacheActor, SeqResult, SeqRequest>);
static_assert(answers<CacheActor, void, CancelRequest>);
static_assert(answers<CacheActor, void, CancelRun>);
static_assert(answers<CacheActor, PinReply, PinRequest>);
static_assert(answers<CacheActor, void, UnpinRequest>);
static_assert(answers<CacheActor, PinReply, PriorityRequest>);
static_assert(answers<CacheActor, TreeReply, TreeRequest>);
static_assert(answers<CacheActor, CacheSnapshot, caf::get_atom, stats_atom>);
static_assert(answers<CacheActor, std::string, caf::get_atom, audit_atom>);
static_assert(caf::detail::tl_size<caf::signatures_of_t<CacheActor>>::value == 9);
// Its timers are its own; nor does it take what other actors take.
static_assert(!takes<CacheActor, step_atom>);
static_assert(!takes<CacheActor, expire_atom>);
static_assert(!takes<CacheActor, TokenEvent>);
static_assert(!takes<CacheActor, AgentReport>);
static_assert(!takes<CacheActor, caf::get_atom>);
static_assert(!answers<CacheActor, CacheStats, caf::get_atom, stats_atom>);  // the snapshot, not its base

static_assert(answers<TokenListener, void, TokenEvent>);
static_assert(caf::detail::tl_size<caf::signatures_of_t<TokenListener>>::value == 1);
static_assert(!is_part_of<TokenListener, CacheActor>);
// A request's listener is typed, so the cache actor streams only to a TokenListener.
static_assert(std::is_same_v<decltype(SeqRequest::listener), TokenListener>);

static_assert(answers<RunActor, void, start_atom>);
static_assert(answers<RunActor, void, cancel_atom>);
static_assert(answers<RunActor, void, AgentStarted>);
static_assert(answers<RunActor, void, AgentReport>);
static_assert(answers<RunActor, void, TokenEvent>);
static_assert(answers<RunActor, void, ToolEvent>);
static_assert(answers<RunActor, DepsReply, DepsRequest>);
static_assert(answers<RunActor, SeqResult, SeqRequest>);
static_assert(answers<RunActor, void, CancelRequest>);
static_assert(caf::detail::tl_size<caf::signatures_of_t<RunActor>>::value == 9);
static_assert(!takes<RunActor, ToolDone>);
static_assert(!takes<RunActor, PinRequest>);  // pins go to the cache actor directly
// The run actor is its agents' listener and hears their reports, without a cast.
static_assert(is_part_of<TokenListener, RunActor>);
static_assert(is_part_of<ReportListener, RunActor>);

static_assert(answers<AgentActor, void, AgentReport>);
static_assert(answers<AgentActor, void, ToolDone>);
static_assert(caf::detail::tl_size<caf::signatures_of_t<AgentActor>>::value == 2);
// Its start, attempt deadline and tool deadlines are its own.
static_assert(!takes<AgentActor, start_atom>);
static_assert(!takes<AgentActor, timeout_atom, int>);
static_assert(!takes<AgentActor, tool_atom, std::uint64_t>);
static_assert(!takes<AgentActor, TokenEvent>);
static_assert(is_part_of<ReportListener, AgentActor>);
static_assert(is_part_of<ToolDoneListener, AgentActor>);
static_assert(!is_part_of<RunActor, AgentActor>);

struct System {
  ActorConfig cfg;  // outlives the system
  caf::actor_system sys{cfg};
  Result<CacheActor> cache;
  System() {
    BatchEngineConfig c;
    c.model = testing::real_model();
    c.engine = testing::cpu_engine();
    c.num_pages = 16;
    cache = spawn_cache_actor(sys, c);
  }
  ~System() {
    if (cache) caf::anon_send_exit(*cache, caf::exit_reason::user_shutdown);
  }
};

// Every reply type of the interface arrives as declared, through the typed handle.
TEST(ActorInterfaces, TheCacheActorHandleAnswersEachRequestWithItsDeclaredType) {
  System s;
  ASSERT_TRUE(s.cache) << s.cache.error().describe();
  caf::scoped_actor self{s.sys};
  const CacheActor& cache = *s.cache;
  CacheSnapshot snap;
  snap.pages_total = -1;
  self->request(cache, caf::infinite, caf::get_atom::value, stats_atom::value)
      .receive([&](CacheSnapshot& r) { snap = r; }, [](caf::error&) { ADD_FAILURE(); });
  EXPECT_EQ(snap.pages_total, 16);
  std::string audit = "no reply";
  self->request(cache, caf::infinite, caf::get_atom::value, audit_atom::value)
      .receive([&](std::string& r) { audit = r; }, [](caf::error&) { ADD_FAILURE(); });
  EXPECT_EQ(audit, "");
  TreeReply tree;
  tree.ok = true;
  self->request(cache, caf::infinite, TreeRequest{"nobody", 8})
      .receive([&](TreeReply& r) { tree = r; }, [](caf::error&) { ADD_FAILURE(); });
  EXPECT_FALSE(tree.ok);
  EXPECT_EQ(tree.error, "tenant 'nobody' has no cache yet");
  PinReply pin;
  pin.ok = true;
  self->request(cache, caf::infinite, PinRequest{"t", "", {1, 2, 3}, 1})
      .receive([&](PinReply& r) { pin = r; }, [](caf::error&) { ADD_FAILURE(); });
  EXPECT_FALSE(pin.ok);  // nothing cached to pin
  EXPECT_NE(pin.error, "");
}

}  // namespace
}  // namespace arbor::actors

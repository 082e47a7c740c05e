// The cache actor through CAF: deferred replies, streaming to a listener, cancellation
// when a requester dies, stats between steps.
#include "actors/cache_actor.hpp"

#include <gtest/gtest.h>

#include "actors/config.hpp"
#include "actors/conversation.hpp"
#include "actors_test_util.hpp"

namespace arbor::actors {
namespace {

using testing::real_chat;
using testing::real_model;

struct System {
  ActorConfig cfg;  // outlives the system
  caf::actor_system sys{cfg};
  CacheActor cache;
  System() {
    BatchEngineConfig c;
    c.model = real_model();
    c.engine = testing::cpu_engine();
    c.num_pages = 64;
    auto a = spawn_cache_actor(sys, c);
    EXPECT_TRUE(a);
    cache = *a;
  }
  ~System() { caf::anon_send_exit(cache, caf::exit_reason::user_shutdown); }
  CacheSnapshot stats() {
    caf::scoped_actor self{sys};
    CacheSnapshot out;
    self->request(cache, caf::infinite, caf::get_atom::value, stats_atom::value)
        .receive([&](CacheSnapshot& s) { out = s; }, [](caf::error&) { ADD_FAILURE(); });
    return out;
  }
  std::string audit() {
    caf::scoped_actor self{sys};
    std::string out = "no reply";
    self->request(cache, caf::infinite, caf::get_atom::value, audit_atom::value)
        .receive([&](std::string& v) { out = v; }, [](caf::error&) { ADD_FAILURE(); });
    return out;
  }
};

SeqRequest request(int max_tokens) {
  Conversation c(real_model()->tokenizer(), real_chat());
  c.start("Be brief.", "Tell me about rivers.");
  SeqRequest r;
  r.request_id = next_request_id();
  r.tenant = "t";
  r.prompt = c.prompt();
  r.sampling.max_tokens = max_tokens;
  return r;
}

TEST(CacheActor, RepliesAndStreamsToTheListener) {
  System s;
  caf::scoped_actor self{s.sys};
  auto req = request(8);
  req.listener = caf::actor_cast<TokenListener>(self);  // a scoped actor is dynamically typed
  SeqResult result;
  self->request(s.cache, caf::infinite, req)
      .receive([&](SeqResult& r) { result = r; }, [](caf::error&) { ADD_FAILURE(); });
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(result.generated_tokens, 8u);
  std::string streamed;
  bool more = true;
  while (more)  // the pieces were sent before the reply, so they are all queued already
    self->receive([&](TokenEvent& e) { streamed += e.text; }, caf::after(std::chrono::seconds(0)) >> [&] { more = false; });
  EXPECT_EQ(streamed, result.text);
  const auto st = s.stats();
  EXPECT_EQ(st.pages_locked, 0);
  EXPECT_EQ(st.generated_tokens, 8u);
  EXPECT_EQ(s.audit(), "");
}

TEST(CacheActor, ARequesterThatDiesHasItsSequenceCancelled) {
  System s;
  auto req = request(2000 - 64);
  CacheActor cache = s.cache;
  // Sends a long request, then quits at once without waiting for the reply.
  auto requester = s.sys.spawn([cache, req](caf::event_based_actor* self) {
    self->request(cache, caf::infinite, req).then([](SeqResult&) {});
    self->quit();
  });
  // Stats requests interleave with the cache actor's steps; the down message cancels
  // the orphan well before it could generate its budget.
  CacheSnapshot st;
  for (int i = 0; i < 10000; ++i) {
    st = s.stats();
    if (st.generated_tokens > 0 && st.live_sequences == 0 && st.queued_requests == 0) break;
  }
  EXPECT_EQ(st.live_sequences, 0);
  EXPECT_EQ(st.pages_locked, 0);
  EXPECT_LT(st.generated_tokens, 200u);
}

}  // namespace
}  // namespace arbor::actors

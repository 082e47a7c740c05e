// ThreadSanitizer builds only (arbor_tsan_tests): the TSan stage must see a race
// between two actors' handlers. With CAF uninstrumented, that needs its message
// hand-offs annotated (tsan_caf_handoff.cpp) instead of whole handlers suppressed
// (tsan.supp); this canary fails if a suppression or an annotation ever hides such a race.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "actors/config.hpp"

namespace arbor {
namespace {

using done_atom = caf::atom_constant<caf::atom("done")>;

int shared_counter = 0;  // written by two actors' handlers without synchronization

caf::behavior racy_actor(caf::event_based_actor* self) {
  return {[self](caf::actor reply_to) {
    ++shared_counter;  // the race
    self->send(reply_to, done_atom::value);
  }};
}

// Two actors, each on its own thread, write one int; the caller waits for both.
void race_between_two_actors() {
  actors::ActorConfig cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto a = sys.spawn<caf::detached>(racy_actor);
  auto b = sys.spawn<caf::detached>(racy_actor);
  self->send(a, caf::actor{self});
  self->send(b, caf::actor{self});
  for (int i = 0; i < 2; ++i) self->receive([](done_atom) {});
  self->send_exit(a, caf::exit_reason::user_shutdown);
  self->send_exit(b, caf::exit_reason::user_shutdown);
}

TEST(TsanCanary, ARaceBetweenTwoActorsHandlersIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child starts afresh, no fork of threads
  // TSan reports, and exits with its exitcode (66) at the end of a run with reports.
  EXPECT_EXIT(
      {
        race_between_two_actors();
        std::exit(0);
      },
      ::testing::ExitedWithCode(66), "ThreadSanitizer: data race");
}

// The same kind of messages with nothing shared: the hand-offs themselves are race-free.
std::string echo_through_an_actor(const std::string& text) {
  actors::ActorConfig cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto echo = sys.spawn<caf::detached>([](caf::event_based_actor* s) -> caf::behavior {
    return {[s](caf::actor reply_to, std::string t) { s->send(reply_to, t + "!"); }};
  });
  std::string got;
  self->send(echo, caf::actor{self}, text);
  self->receive([&](std::string& t) { got = t; });
  self->send_exit(echo, caf::exit_reason::user_shutdown);
  return got;
}

TEST(TsanCanary, MessageHandOffsAloneReportNothing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(echo_through_an_actor("hello") == "hello!" ? 0 : 1), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace arbor

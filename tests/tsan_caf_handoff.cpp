// Linked into arbor_tsan_tests only (ThreadSanitizer builds, scripts/tsan.sh).
//
// CAF 0.17 is Debian's libcaf_core.so, not built with TSan: the atomics with which it
// hands a message from its sender to the actor that handles it (mailbox push and pop)
// and an actor from one worker thread to the next are invisible to TSan. Without help,
// every message looks like a race between the thread that built it and the one that
// reads it. This file tells TSan about those hand-offs, so that a race between actors'
// handlers, or between a handler and any other thread, is still reported:
//  - enqueuing a message into an actor, or launching it, releases on the actor;
//  - an actor acquires on itself before it starts (make_behavior) and before each
//    message it handles, and releases on itself after each (an actor run later on
//    another worker sees what the previous one did); so does its resume;
//  - a blocking actor (caf::scoped_actor) likewise around each message it receives.
// That is exactly what CAF guarantees: the mailbox push is a release, the pop an
// acquire on the same atomic, and an actor is rescheduled through the same queues.
//
// The functions below interpose CAF's exported members of the same name (the executable's
// definition wins over the shared library's, also for calls made through CAF's vtables),
// annotate, and call CAF's own definition (found with dlsym(RTLD_NEXT)). If an interposed
// symbol cannot be found, the test run aborts rather than silently seeing nothing.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include <caf/blocking_actor.hpp>
#include <caf/scheduled_actor.hpp>

extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);

namespace {

template <class Fn>
Fn next_definition(const char* mangled) {
  void* fn = dlsym(RTLD_NEXT, mangled);
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan_caf_handoff: %s not found in libcaf_core (CAF version changed?)\n", mangled);
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

}  // namespace

namespace caf {

// A member function's `this` is its first parameter in the Itanium C++ ABI, so CAF's
// definitions are called through plain function pointers.
void scheduled_actor::enqueue(mailbox_element_ptr ptr, execution_unit* eu) {
  using Fn = void (*)(scheduled_actor*, mailbox_element_ptr, execution_unit*);
  static const Fn next = next_definition<Fn>(
      "_ZN3caf15scheduled_actor7enqueueESt10unique_ptrINS_15mailbox_elementENS_6detail8disposerEEPNS_14execution_unitE");
  __tsan_release(this);
  next(this, std::move(ptr), eu);
}

void scheduled_actor::launch(execution_unit* eu, bool lazy, bool hide) {
  using Fn = void (*)(scheduled_actor*, execution_unit*, bool, bool);
  static const Fn next = next_definition<Fn>("_ZN3caf15scheduled_actor6launchEPNS_14execution_unitEbb");
  __tsan_release(this);  // what the spawner wrote (the actor's arguments) precedes its start
  next(this, eu, lazy, hide);
}

resumable::resume_result scheduled_actor::resume(execution_unit* eu, size_t max_throughput) {
  using Fn = resumable::resume_result (*)(scheduled_actor*, execution_unit*, size_t);
  static const Fn next = next_definition<Fn>("_ZN3caf15scheduled_actor6resumeEPNS_14execution_unitEm");
  __tsan_acquire(this);
  const auto result = next(this, eu, max_throughput);
  __tsan_release(this);
  return result;
}

// Starting an actor (make_behavior) on the worker that first resumes it.
bool scheduled_actor::activate(execution_unit* ctx) {
  using Fn = bool (*)(scheduled_actor*, execution_unit*);
  static const Fn next = next_definition<Fn>("_ZN3caf15scheduled_actor8activateEPNS_14execution_unitE");
  __tsan_acquire(this);
  const bool alive = next(this, ctx);
  __tsan_release(this);
  return alive;
}

// Each message an actor handles, also those that arrive while it runs (one resume
// handles many): CAF's resume is entered through a thunk that interposition cannot
// reach, this visitor is not.
intrusive::task_result scheduled_actor::mailbox_visitor::operator()(mailbox_element& x) {
  using Fn = intrusive::task_result (*)(mailbox_visitor*, mailbox_element&);
  static const Fn next = next_definition<Fn>("_ZN3caf15scheduled_actor15mailbox_visitorclERNS_15mailbox_elementE");
  scheduled_actor* const actor = self;  // the visitor may not outlive the call
  __tsan_acquire(actor);
  const auto result = next(this, x);
  __tsan_release(actor);
  return result;
}

void blocking_actor::enqueue(mailbox_element_ptr ptr, execution_unit* eu) {
  using Fn = void (*)(blocking_actor*, mailbox_element_ptr, execution_unit*);
  static const Fn next = next_definition<Fn>(
      "_ZN3caf14blocking_actor7enqueueESt10unique_ptrINS_15mailbox_elementENS_6detail8disposerEEPNS_14execution_unitE");
  __tsan_release(this);
  next(this, std::move(ptr), eu);
}

intrusive::task_result blocking_actor::mailbox_visitor::operator()(mailbox_element& x) {
  using Fn = intrusive::task_result (*)(mailbox_visitor*, mailbox_element&);
  static const Fn next = next_definition<Fn>("_ZN3caf14blocking_actor15mailbox_visitorclERNS_15mailbox_elementE");
  blocking_actor* const actor = self;
  __tsan_acquire(actor);
  const auto result = next(this, x);
  __tsan_release(actor);
  return result;
}

}  // namespace caf

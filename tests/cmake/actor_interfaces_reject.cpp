// Compiled by actor_interfaces_reject.cmake, once per CASE: "ok" must compile, each
// other case is one message the actors' interfaces (actors/interfaces.hpp) do not
// declare, or a reply of the wrong type, and must not compile. Cases 6 and 7: the
// cluster's interfaces (runtime/cluster/interfaces.hpp).
#include "actors/interfaces.hpp"
#include "runtime/cluster/interfaces.hpp"

namespace arbor::actors {

void use(caf::event_based_actor* self, CacheActor cache, RunActor run, AgentActor agent) {
  // What the interfaces declare compiles, including handles converted without a cast.
  caf::anon_send(cache, CancelRequest{});
  self->request(cache, caf::infinite, SeqRequest{}).then([](SeqResult&) {});
  TokenListener listener = run;
  ReportListener parent = agent;
  caf::anon_send(parent, AgentReport{});
  SeqRequest req;
  req.listener = listener;
#if CASE == 1  // a message of another actor
  caf::anon_send(cache, AgentReport{});
#elif CASE == 2  // the cache actor's own step timer
  caf::anon_send(cache, step_atom::value);
#elif CASE == 3  // an agent's own start
  caf::anon_send(agent, start_atom::value);
#elif CASE == 4  // a reply handler of the wrong type
  self->request(cache, caf::infinite, PinRequest{}).then([](SeqResult&) {});
#elif CASE == 5  // a handle of an interface the actor does not have
  AgentActor wrong = run;
#endif
}

}  // namespace arbor::actors

namespace arbor::cluster {

void use(NodeActor node, ReplyListener inbox, caf::actor any) {
  caf::anon_send(node, node_gen_atom::value, std::uint64_t{1}, std::string{}, inbox, true);
  caf::anon_send(inbox, node_done_atom::value, std::uint64_t{1}, std::string{});
#if CASE == 6  // a requester that is any actor, not a ReplyListener
  caf::anon_send(node, node_gen_atom::value, std::uint64_t{1}, std::string{}, any, true);
#elif CASE == 7  // what a node sends back, sent to a node
  caf::anon_send(node, node_done_atom::value, std::uint64_t{1}, std::string{});
#endif
}

}  // namespace arbor::cluster

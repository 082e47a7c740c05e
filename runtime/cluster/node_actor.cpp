#include "runtime/cluster/node_actor.hpp"

#include <map>
#include <utility>

#include "runtime/cluster/wire.hpp"

namespace arbor::cluster {
namespace {

using forget_atom = caf::atom_constant<caf::atom("nforget")>;

struct Live {
  GenerationHandle handle;
  caf::actor_addr requester;
};

struct NodeState {
  Runtime* runtime = nullptr;
  // Generations in flight, by (requester, the requester's id): ids are the router's,
  // so two routers may use the same one.
  std::map<std::pair<caf::actor_addr, std::uint64_t>, Live> live;
  std::map<caf::actor_addr, int> monitored;  // requesters watched for down messages
};

void start(caf::stateful_actor<NodeState>* self, std::uint64_t id, const std::string& text, const caf::actor& reply_to,
           bool pieces) {
  auto request = request_from_wire(text);
  if (!request) return caf::anon_send(reply_to, node_done_atom::value, id, to_wire(Result<GenerateResult>(
                                                                                 std::unexpected(request.error()))));
  const caf::actor me = caf::actor_cast<caf::actor>(self);
  const caf::actor_addr from = reply_to.address();
  auto handle = self->state.runtime->start_generate(
      *request,
      pieces ? std::function<void(const std::string&)>([reply_to, id](const std::string& piece) {
        caf::anon_send(reply_to, node_piece_atom::value, id, piece);
      })
             : std::function<void(const std::string&)>{},
      [reply_to, id, me, from](const Result<GenerateResult>& outcome) {
        caf::anon_send(reply_to, node_done_atom::value, id, to_wire(outcome));
        caf::anon_send(me, forget_atom::value, from, id);
      });
  if (!handle)
    return caf::anon_send(reply_to, node_done_atom::value, id,
                          to_wire(Result<GenerateResult>(std::unexpected(handle.error()))));
  // on_done may already have run: its forget message comes after this handler, so the
  // entry never outlives the generation.
  self->state.live.insert_or_assign({from, id}, Live{*handle, from});
  if (self->state.monitored.emplace(from, 0).second) self->monitor(reply_to);
}

}  // namespace

caf::actor spawn_node_actor(caf::actor_system& system, Runtime& runtime) {
  return system.spawn([&runtime](caf::stateful_actor<NodeState>* self) -> caf::behavior {
    self->state.runtime = &runtime;
    self->set_down_handler([self](caf::down_msg& down) {
      self->state.monitored.erase(down.source);
      for (auto& [key, live] : self->state.live)
        if (live.requester == down.source) live.handle.cancel();  // on_done forgets them
    });
    return {
        [self](node_info_atom) -> std::string {
          const auto& rt = *self->state.runtime;
          const auto stats = rt.cache_stats();
          return to_wire(NodeInfo{rt.model_name(), rt.context_length(), std::size_t(rt.config().page_size),
                                  std::size_t(stats.pages_total)});
        },
        [self](node_stats_atom) -> std::string {
          return to_wire(NodeStats{self->state.runtime->cache_stats(), self->state.live.size()});
        },
        [self](node_gen_atom, std::uint64_t id, const std::string& request, const caf::actor& reply_to, bool pieces) {
          start(self, id, request, reply_to, pieces);
        },
        [self](node_cancel_atom, std::uint64_t id, const caf::actor& reply_to) {
          if (auto it = self->state.live.find({reply_to.address(), id}); it != self->state.live.end())
            it->second.handle.cancel();
        },
        [self](forget_atom, const caf::actor_addr& from, std::uint64_t id) { self->state.live.erase({from, id}); },
    };
  });
}

}  // namespace arbor::cluster

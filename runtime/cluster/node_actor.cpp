#include "runtime/cluster/node_actor.hpp"

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/cluster/wire.hpp"

namespace arbor::cluster {
namespace {

using answer_atom = caf::atom_constant<caf::atom("nanswer")>;
using run_finished_atom = caf::atom_constant<caf::atom("nrfinish")>;

// The node actor's own messages (its worker's answer to a stats question; a run's
// run_finished event, sent from the run's callback) are not part of NodeActor: only
// the narrower handle leaves the actor.
using NodeImpl = NodeActor::extend<caf::reacts_to<answer_atom, std::uint64_t, std::string>,
                                   caf::reacts_to<run_finished_atom, std::uint64_t, RunListener, std::string>>;

// Every call into the Runtime runs on this thread of the node's own, never on an actor
// thread of the network system: a call made there (a scoped_actor for cache_stats, the
// spawn of start_generate) left the Runtime's actor system unable to shut down.
class Asker {
 public:
  Asker() : thread_([this] { loop(); }) {}
  ~Asker() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void post(std::function<void()> job) {
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(std::move(job));
    }
    wake_.notify_one();
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      wake_.wait(lock, [this] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> jobs_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

// The generations in flight, by (requester, the requester's id): ids are the
// router's, so two routers may use the same one. Shared by the actor's jobs on the
// worker and the generations' callbacks (runtime threads).
struct LiveTable {
  std::mutex mu;
  std::map<std::pair<caf::actor_addr, std::uint64_t>, GenerationHandle> live;

  std::size_t size() {
    std::lock_guard lock(mu);
    return live.size();
  }
  void cancel_where(const std::function<bool(const std::pair<caf::actor_addr, std::uint64_t>&)>& match) {
    std::vector<GenerationHandle> hit;
    {
      std::lock_guard lock(mu);
      for (auto& [key, handle] : live)
        if (match(key)) hit.push_back(handle);
    }
    for (auto& h : hit) h.cancel();  // on_done removes them
  }
};

// The workflow runs in flight, keyed like LiveTable; only the worker touches the map
// (the mutex is for the stats question's count).
struct RunTable {
  std::mutex mu;
  std::map<std::pair<caf::actor_addr, std::uint64_t>, RunHandle> live;

  std::size_t size() {
    std::lock_guard lock(mu);
    return live.size();
  }
  void cancel_where(const std::function<bool(const std::pair<caf::actor_addr, std::uint64_t>&)>& match) {
    std::vector<RunHandle> hit;
    {
      std::lock_guard lock(mu);
      for (auto& [key, handle] : live)
        if (match(key)) hit.push_back(handle);
    }
    for (auto& h : hit) h.cancel();  // its run_finished event ends it here
  }
};

// The KV event followers (routers) and the runtime subscription feeding them; the
// callback runs on the runtime's cache thread, so the list has its own lock.
struct KvForward {
  std::mutex mu;
  std::map<caf::actor_addr, std::pair<KvListener, std::uint64_t>> listeners;
  KvEventSubscription subscription;  // the actor's thread only; last: reset first

  void forward(const KvEvent& event) {
    std::vector<std::pair<KvListener, std::uint64_t>> to;
    {
      std::lock_guard lock(mu);
      for (const auto& [addr, l] : listeners) to.push_back(l);
    }
    if (to.empty()) return;
    const std::string text = kv_event_json(event).dump();
    for (const auto& [listener, tag] : to) caf::anon_send(listener, node_kv_atom::value, tag, text);
  }
};

struct NodeState {
  Runtime* runtime = nullptr;
  std::string info;  // NodeInfo JSON, fixed at start
  std::shared_ptr<LiveTable> table = std::make_shared<LiveTable>();
  std::shared_ptr<RunTable> runs = std::make_shared<RunTable>();
  std::map<caf::actor_addr, int> monitored;  // requesters watched for down messages
  std::map<std::uint64_t, caf::response_promise> questions;  // stats or trees asked, by question id
  std::uint64_t next_question = 1;
  std::shared_ptr<KvForward> kv = std::make_shared<KvForward>();
  std::unique_ptr<Asker> asker = std::make_unique<Asker>();  // last: joined first when the state goes
};

// A question the runtime answers (it blocks): `answer` runs on the worker, its text
// comes back as answer_atom and is delivered to the asker (the actor never blocks).
template <class Self>
caf::result<std::string> answer_on_worker(Self self, std::function<std::string()> answer) {
  const std::uint64_t question = self->state.next_question++;
  self->state.questions.emplace(question, self->make_response_promise());
  self->state.asker->post([me = caf::actor_cast<NodeImpl>(self), question, answer = std::move(answer)] {
    caf::anon_send(me, answer_atom::value, question, answer());
  });
  return caf::delegated<std::string>();
}

// On the worker: starts the generation; its callbacks send to the requester.
void start(Runtime& runtime, const std::shared_ptr<LiveTable>& table, std::uint64_t id, const std::string& text,
           const ReplyListener& reply_to, bool pieces) {
  auto request = request_from_wire(text);
  if (!request) return caf::anon_send(reply_to, node_done_atom::value, id, to_wire(Result<GenerateResult>(
                                                                                 std::unexpected(request.error()))));
  const auto key = std::make_pair(reply_to.address(), id);
  auto finished = std::make_shared<bool>(false);  // guarded by table->mu
  auto handle = runtime.start_generate(
      *request,
      pieces ? std::function<void(const std::string&)>([reply_to, id](const std::string& piece) {
        caf::anon_send(reply_to, node_piece_atom::value, id, piece);
      })
             : std::function<void(const std::string&)>{},
      [reply_to, id, table, key, finished](const Result<GenerateResult>& outcome) {
        {
          std::lock_guard lock(table->mu);
          *finished = true;
          table->live.erase(key);
        }
        caf::anon_send(reply_to, node_done_atom::value, id, to_wire(outcome));
      });
  if (!handle)
    return caf::anon_send(reply_to, node_done_atom::value, id,
                          to_wire(Result<GenerateResult>(std::unexpected(handle.error()))));
  std::lock_guard lock(table->mu);
  if (!*finished) table->live.insert_or_assign(key, *handle);  // on_done may have run already
}

// On the worker: starts the run. Its events go straight to the requester; its
// run_finished event goes to the node actor (`me`), whose worker then collects the
// result (finish_run): a callback must not wait for its own run.
void start_run(Runtime& runtime, const std::shared_ptr<RunTable>& runs, const NodeImpl& me, std::uint64_t id,
               const std::string& text, const RunListener& reply_to) {
  auto refuse = [&](const Error& e) {
    caf::anon_send(reply_to, node_run_done_atom::value, id, to_wire(Result<RunOutcome>(std::unexpected(e))));
  };
  auto request = run_request_from_wire(text);
  if (!request) return refuse(request.error());
  auto handle = runtime.start(request->workflow,
                              {.inputs = request->inputs,
                               .on_event =
                                   [reply_to, id, me](const Event& event) {
                                     if (event.kind == Event::Kind::run_finished)
                                       caf::anon_send(me, run_finished_atom::value, id, reply_to, event_to_wire(event));
                                     else
                                       caf::anon_send(reply_to, node_run_event_atom::value, id, event_to_wire(event));
                                   },
                               .workflow_is_text = true,
                               .tenant = request->tenant,
                               .documents = DocumentAccess::given_files(std::move(request->documents))});
  if (!handle) return refuse(handle.error());
  std::lock_guard lock(runs->mu);
  runs->live.insert_or_assign(std::make_pair(reply_to.address(), id), *handle);
}

// On the worker, after the run's run_finished event (its start job ran before): the
// result is final within microseconds of that event.
void finish_run(const std::shared_ptr<RunTable>& runs, std::uint64_t id, const RunListener& reply_to,
                const std::string& finished) {
  std::optional<RunHandle> handle;
  {
    std::lock_guard lock(runs->mu);
    auto it = runs->live.find(std::make_pair(reply_to.address(), id));
    if (it == runs->live.end()) return;
    handle = it->second;
    runs->live.erase(it);
  }
  auto event = event_from_wire(finished);
  Result<RunOutcome> outcome = event ? Result<RunOutcome>(RunOutcome{handle->wait(), std::move(*event)})
                                     : Result<RunOutcome>(std::unexpected(event.error()));
  caf::anon_send(reply_to, node_run_done_atom::value, id, to_wire(outcome));
}

}  // namespace

NodeInfo node_info(const Runtime& runtime) {
  return NodeInfo{runtime.model_name(), runtime.context_length(), std::size_t(runtime.config().page_size),
                  std::size_t(runtime.cache_stats().pages_total)};
}

NodeActor spawn_node_actor(caf::actor_system& system, Runtime& runtime, const NodeInfo& info) {
  return system.spawn([&runtime,
                       info = to_wire(info)](NodeImpl::stateful_pointer<NodeState> self) -> NodeImpl::behavior_type {
    self->state.runtime = &runtime;
    self->state.info = info;
    self->set_down_handler([self](caf::down_msg& down) {
      self->state.monitored.erase(down.source);
      {
        std::lock_guard lock(self->state.kv->mu);
        self->state.kv->listeners.erase(down.source);  // a dead router gets no more events
      }
      self->state.asker->post([table = self->state.table, runs = self->state.runs, from = down.source] {
        table->cancel_where([&](const auto& key) { return key.first == from; });
        runs->cancel_where([&](const auto& key) { return key.first == from; });
      });
    });
    return {
        [self](node_info_atom) -> std::string { return self->state.info; },
        [self](node_stats_atom) -> caf::result<std::string> {
          return answer_on_worker(self, [runtime = self->state.runtime, table = self->state.table,
                                         runs = self->state.runs] {
            return to_wire(NodeStats{runtime->cache_stats(), table->size(), runs->size()});
          });
        },
        [self](node_tree_atom, const std::string& tenant, std::uint64_t max_nodes) -> caf::result<std::string> {
          return answer_on_worker(self, [runtime = self->state.runtime, tenant, max_nodes] {
            return tree_to_wire(runtime->cache_tree(tenant, std::size_t(max_nodes)));
          });
        },
        [self](answer_atom, std::uint64_t question, std::string text) {
          auto it = self->state.questions.find(question);
          if (it == self->state.questions.end()) return;
          it->second.deliver(std::move(text));
          self->state.questions.erase(it);
        },
        [self](node_gen_atom, std::uint64_t id, const std::string& request, const ReplyListener& reply_to,
               bool pieces) {
          if (self->state.monitored.emplace(reply_to.address(), 0).second) self->monitor(reply_to);
          self->state.asker->post([runtime = self->state.runtime, table = self->state.table, id, request, reply_to,
                                   pieces] { start(*runtime, table, id, request, reply_to, pieces); });
        },
        [self](node_kv_subscribe_atom, const KvListener& listener, std::uint64_t tag) {
          if (!listener) return;
          if (self->state.monitored.emplace(listener.address(), 0).second) self->monitor(listener);
          auto& kv = *self->state.kv;
          {
            std::lock_guard lock(kv.mu);
            kv.listeners.insert_or_assign(listener.address(), std::make_pair(listener, tag));
          }
          if (!kv.subscription)
            kv.subscription = self->state.runtime->subscribe_kv_events(
                [weak = std::weak_ptr<KvForward>(self->state.kv)](const KvEvent& e) {
                  if (auto k = weak.lock()) k->forward(e);
                });
        },
        [self](node_cancel_atom, std::uint64_t id, const ReplyListener& reply_to) {
          self->state.asker->post([table = self->state.table, key = std::make_pair(reply_to.address(), id)] {
            table->cancel_where([&](const auto& k) { return k == key; });
          });
        },
        [self](node_run_atom, std::uint64_t id, const std::string& request, const RunListener& reply_to) {
          if (self->state.monitored.emplace(reply_to.address(), 0).second) self->monitor(reply_to);
          const NodeImpl me = caf::actor_cast<NodeImpl>(self);
          self->state.asker->post([runtime = self->state.runtime, runs = self->state.runs, me, id, request, reply_to] {
            start_run(*runtime, runs, me, id, request, reply_to);
          });
        },
        [self](run_finished_atom, std::uint64_t id, const RunListener& reply_to, const std::string& event) {
          self->state.asker->post(
              [runs = self->state.runs, id, reply_to, event] { finish_run(runs, id, reply_to, event); });
        },
        [self](node_run_cancel_atom, std::uint64_t id, const RunListener& reply_to) {
          self->state.asker->post([runs = self->state.runs, key = std::make_pair(reply_to.address(), id)] {
            runs->cancel_where([&](const auto& k) { return k == key; });
          });
        },
    };
  });
}

}  // namespace arbor::cluster

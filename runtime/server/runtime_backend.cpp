// Backend over arbor::Runtime. A generation reports its end through the Runtime's
// completion callback (no thread waits for it); the backend keeps the live ones so that
// destroying it cancels them and waits until their callbacks have returned.
#include <condition_variable>
#include <mutex>
#include <unordered_map>

#include "runtime/server/backend.hpp"

namespace arbor::server {
namespace {

class RuntimeGeneration final : public Generation {
 public:
  explicit RuntimeGeneration(GenerationHandle handle) : handle_(std::move(handle)) {}
  void cancel() override { handle_.cancel(); }

 private:
  GenerationHandle handle_;
};

class RuntimeRun final : public RunControl {
 public:
  explicit RuntimeRun(RunHandle handle) : handle_(std::move(handle)) {}
  std::string id() const override { return handle_.id(); }
  bool done() const override { return handle_.done(); }
  RunResult snapshot() const override { return handle_.snapshot(); }
  RunResult wait() override { return handle_.wait(); }
  void cancel() override { handle_.cancel(); }

 private:
  mutable RunHandle handle_;
};

class RuntimeBackend final : public Backend {
 public:
  explicit RuntimeBackend(Runtime& runtime) : runtime_(runtime) {}

  ~RuntimeBackend() override {
    std::unique_lock lock(mutex_);
    for (auto& [id, generation] : live_)
      if (generation) generation->cancel();
    // A callback may still be running: it erases its entry after it returns.
    ended_.wait(lock, [this] { return live_.empty(); });
  }

  std::string model_name() const override { return runtime_.model_name(); }
  std::size_t context_length() const override { return runtime_.context_length(); }

  Result<std::shared_ptr<Generation>> start_generate(const GenerateRequest& request,
                                                     std::function<void(const std::string&)> on_token,
                                                     std::function<void(const Result<GenerateResult>&)> on_done) override {
    std::unique_lock lock(mutex_);
    const std::uint64_t id = next_id_++;
    live_[id] = nullptr;  // registered before it can end: its callback finds the entry
    lock.unlock();
    auto handle = runtime_.start_generate(
        request, std::move(on_token), [this, id, on_done = std::move(on_done)](const Result<GenerateResult>& result) {
          on_done(result);
          std::lock_guard guard(mutex_);
          live_.erase(id);
          ended_.notify_all();
        });
    lock.lock();
    if (!handle) {
      live_.erase(id);  // never started: no callback will come
      ended_.notify_all();
      return std::unexpected(handle.error());
    }
    auto generation = std::make_shared<RuntimeGeneration>(std::move(*handle));
    if (auto it = live_.find(id); it != live_.end()) it->second = generation;  // else: already over
    return generation;
  }

  Result<std::shared_ptr<RunControl>> start_run(const std::string& workflow_json,
                                                const std::map<std::string, std::string>& inputs,
                                                EventCallback on_event, const std::string& tenant,
                                                const DocumentAccess& documents) override {
    auto handle = runtime_.start(workflow_json, {.inputs = inputs,
                                                 .on_event = std::move(on_event),
                                                 .workflow_is_text = true,
                                                 .tenant = tenant,
                                                 .documents = documents});
    if (!handle) return std::unexpected(handle.error());
    return std::make_shared<RuntimeRun>(std::move(*handle));
  }

  std::string run_json(const RunResult& result) const override { return to_json(result); }
  CacheStats cache_stats() const override { return runtime_.cache_stats(); }
  Result<KvEventSubscription> subscribe_kv_events(std::function<void(const KvEvent&)> callback) override {
    return runtime_.subscribe_kv_events(std::move(callback));
  }
  std::vector<CacheTreeNode> cache_tree(const std::string& tenant, std::size_t max_nodes) const override {
    return runtime_.cache_tree(tenant, max_nodes);
  }

 private:
  Runtime& runtime_;
  std::mutex mutex_;
  std::condition_variable ended_;
  std::uint64_t next_id_ = 1;
  // Generations whose callback has not returned yet (null until start_generate returns).
  std::unordered_map<std::uint64_t, std::shared_ptr<RuntimeGeneration>> live_;
};

}  // namespace

std::unique_ptr<Backend> make_runtime_backend(Runtime& runtime) {
  return std::make_unique<RuntimeBackend>(runtime);
}

}  // namespace arbor::server

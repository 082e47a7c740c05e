// Backend over arbor::Runtime. The Runtime reports a generation's end only through
// GenerationHandle::wait(), so each generation is awaited on a private waiter thread.
#include <atomic>
#include <mutex>
#include <unordered_map>

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include "runtime/server/backend.hpp"

namespace arbor::server {
namespace {

class RuntimeGeneration final : public Generation {
 public:
  explicit RuntimeGeneration(GenerationHandle handle) : handle_(std::move(handle)) {}
  void cancel() override { handle_.cancel(); }
  GenerationHandle& handle() { return handle_; }

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
  RuntimeBackend(Runtime& runtime, int num_waiters)
      : runtime_(runtime), waiters_(static_cast<std::size_t>(std::max(1, num_waiters))) {}

  ~RuntimeBackend() override {
    {
      std::lock_guard lock(mutex_);
      for (auto& [id, generation] : live_) generation->cancel();
    }
    waiters_.join();
  }

  std::string model_name() const override { return runtime_.model_name(); }
  std::size_t context_length() const override { return runtime_.context_length(); }

  Result<std::shared_ptr<Generation>> start_generate(const GenerateRequest& request,
                                                     std::function<void(const std::string&)> on_token,
                                                     std::function<void(const Result<GenerateResult>&)> on_done) override {
    auto handle = runtime_.start_generate(request, std::move(on_token));
    if (!handle) return std::unexpected(handle.error());
    auto generation = std::make_shared<RuntimeGeneration>(std::move(*handle));
    const std::uint64_t id = next_id_++;
    {
      std::lock_guard lock(mutex_);
      live_[id] = generation;
    }
    boost::asio::post(waiters_, [this, id, generation, on_done = std::move(on_done)] {
      Result<GenerateResult> result = generation->handle().result();
      {
        std::lock_guard lock(mutex_);
        live_.erase(id);
      }
      on_done(result);
    });
    return generation;
  }

  Result<std::shared_ptr<RunControl>> start_run(const std::string& workflow_json,
                                                const std::map<std::string, std::string>& inputs,
                                                EventCallback on_event, const std::string& tenant,
                                                const DocumentAccess& documents) override {
    auto handle = runtime_.start(workflow_json, inputs, std::move(on_event), /*is_text=*/true, tenant, documents);
    if (!handle) return std::unexpected(handle.error());
    return std::make_shared<RuntimeRun>(std::move(*handle));
  }

  std::string run_json(const RunResult& result) const override { return to_json(result); }
  CacheStats cache_stats() const override { return runtime_.cache_stats(); }
  std::vector<CacheTreeNode> cache_tree(const std::string& tenant, std::size_t max_nodes) const override {
    return runtime_.cache_tree(tenant, max_nodes);
  }

 private:
  Runtime& runtime_;
  boost::asio::thread_pool waiters_;
  std::atomic<std::uint64_t> next_id_{1};
  std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::shared_ptr<RuntimeGeneration>> live_;
};

}  // namespace

std::unique_ptr<Backend> make_runtime_backend(Runtime& runtime, int num_waiters) {
  return std::make_unique<RuntimeBackend>(runtime, num_waiters);
}

}  // namespace arbor::server

#include "kernels/cpu/thread_pool.hpp"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace arbor::kernels::cpu {

// Protocol: the caller publishes the job (fn, n) then bumps `generation_`. Workers
// spin on `generation_` for a short while (a decode step issues parallel_fors
// microseconds apart), then sleep in atomic::wait (a futex on Linux). Each worker runs
// its static chunk and decrements `pending_`; the caller runs chunk 0 and then waits
// for `pending_` to reach zero. Static chunks: kernels split their work into equal
// tiles, and work stealing costs more than it gains on a few cores.
struct ThreadPool::Impl {
  using Fn = std::function<void(int, std::int64_t, std::int64_t)>;

  explicit Impl(int num_threads) : num_threads_(num_threads) {
    for (int t = 1; t < num_threads_; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
  }
  ~Impl() {
    stop_.store(true, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto& w : workers_) w.join();
  }

  void run_chunk(int t) {
    const std::int64_t begin = n_ * t / num_threads_;
    const std::int64_t end = n_ * (t + 1) / num_threads_;
    if (begin < end) (*fn_)(t, begin, end);
  }

  void worker_loop(int t) {
    std::uint64_t seen = 0;
    for (;;) {
      std::uint64_t g = generation_.load(std::memory_order_acquire);
      spin_while([&] { return (g = generation_.load(std::memory_order_acquire)) == seen; });
      while (g == seen) {
        generation_.wait(seen, std::memory_order_acquire);
        g = generation_.load(std::memory_order_acquire);
      }
      seen = g;
      if (stop_.load(std::memory_order_relaxed)) return;
      run_chunk(t);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
    }
  }

  void parallel_for(std::int64_t n, const Fn& fn) {
    if (n <= 0) return;
    if (num_threads_ == 1 || n == 1) {
      fn(0, 0, n);
      return;
    }
    fn_ = &fn;
    n_ = n;
    pending_.store(num_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    run_chunk(0);
    int left = pending_.load(std::memory_order_acquire);
    spin_while([&] { return (left = pending_.load(std::memory_order_acquire)) != 0; });
    while (left != 0) {
      pending_.wait(left, std::memory_order_acquire);
      left = pending_.load(std::memory_order_acquire);
    }
  }

  // Spins while `busy()` for at most kSpin: long enough to cover the gap between the
  // kernels of one decode step (a few us of serial work), short enough not to steal a
  // core from other processes when the engine is idle or the machine is oversubscribed.
  template <typename Busy>
  static void spin_while(Busy&& busy) {
    if (!busy()) return;
    const auto deadline = std::chrono::steady_clock::now() + kSpin;
    for (;;) {
      for (int i = 0; i < 16; ++i) {
        _mm_pause();
        if (!busy()) return;
      }
      if (std::chrono::steady_clock::now() > deadline) return;
    }
  }
  static constexpr std::chrono::microseconds kSpin{30};

  const int num_threads_;
  std::vector<std::thread> workers_;
  std::atomic<std::uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  const Fn* fn_ = nullptr;
  std::int64_t n_ = 0;
};

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  impl_ = new Impl(num_threads);
}

ThreadPool::~ThreadPool() { delete impl_; }

int ThreadPool::num_threads() const { return impl_->num_threads_; }

void ThreadPool::parallel_for(
    std::int64_t n, const std::function<void(int thread, std::int64_t begin, std::int64_t end)>& fn) {
  impl_->parallel_for(n, fn);
}

}  // namespace arbor::kernels::cpu

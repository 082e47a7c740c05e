// A fixed pool of worker threads for data-parallel kernels. The calling thread
// takes part in the work, so ThreadPool(1) runs everything inline.
// One parallel_for at a time per pool (callers serialise: the engine owns its pool).
// Workers spin ~30 us after each job (covering the gaps between a decode step's
// kernels), then sleep on a futex; chunks are static: [n*t/T, n*(t+1)/T) for thread t.
#pragma once

#include <cstdint>
#include <functional>

namespace arbor::kernels::cpu {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);  // num_threads >= 1 (0 = hardware threads)
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const;

  // Calls fn(thread_index, begin, end) over disjoint chunks covering [0, n); returns
  // when all are done. Overhead must stay in the low microseconds: the engine calls
  // this hundreds of times per decoded token.
  void parallel_for(std::int64_t n,
                    const std::function<void(int thread, std::int64_t begin, std::int64_t end)>& fn);

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace arbor::kernels::cpu

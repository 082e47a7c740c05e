#include "kernels/cpu/thread_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace arbor::kernels::cpu {
namespace {

TEST(ThreadPool, CoversRangeExactlyOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.num_threads(), threads);
    for (std::int64_t n : {0, 1, 2, 3, 4, 5, 7, 16, 31, 100, 1000, 12345}) {
      std::vector<std::atomic<int>> hits(std::size_t(n) + 1);
      std::atomic<int> bad_thread{0};
      pool.parallel_for(n, [&](int t, std::int64_t b, std::int64_t e) {
        if (t < 0 || t >= threads || b < 0 || e > n || b >= e) bad_thread.fetch_add(1);
        for (std::int64_t i = b; i < e; ++i) hits[std::size_t(i)].fetch_add(1);
      });
      EXPECT_EQ(bad_thread.load(), 0);
      for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[std::size_t(i)].load(), 1) << "n " << n << " i " << i;
    }
  }
}

TEST(ThreadPool, ManyBackToBackCalls) {
  ThreadPool pool(2);
  std::atomic<std::int64_t> total{0};
  for (int call = 0; call < 20000; ++call) {
    pool.parallel_for(64, [&](int, std::int64_t b, std::int64_t e) { total.fetch_add(e - b); });
  }
  EXPECT_EQ(total.load(), 20000 * 64);
}

TEST(ThreadPool, ZeroMeansHardwareThreads) {
  ThreadPool pool(0);
  EXPECT_GE(pool.num_threads(), 1);
}

}  // namespace
}  // namespace arbor::kernels::cpu

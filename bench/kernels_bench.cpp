// Kernel micro-benchmarks on the default model's shapes (SmolLM2-135M: Q4_1 matrices,
// Q8_0 tied output matrix), random weights. Plain executable:
//   build/bench/kernels_bench [--threads N] [--quick] [--cpu-time]
// Prints per-matrix GEMV (m=1) time and effective GB/s (weights streamed from DRAM:
// enough copies are cycled to defeat the caches), GEMM (m=512) time and GFLOP/s, a
// whole-model matmul sweep (30 layers + output) giving matmul-only tokens/s estimates,
// paged attention, and the thread pool's per-call overhead.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/fp16.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "kernels/ggml_types.hpp"

using namespace arbor::kernels;
using namespace arbor::kernels::cpu;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<std::uint8_t> random_matrix(std::mt19937& rng, GgmlType type, std::int64_t rows, std::int64_t cols) {
  const std::size_t bytes = row_bytes(type, cols) * rows;
  std::vector<std::uint8_t> data(bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : data) b = std::uint8_t(byte(rng));
  const BlockShape s = block_shape(type);
  const std::uint16_t d = fp32_to_fp16(0.01f), m = fp32_to_fp16(-0.08f);
  for (std::size_t off = 0; off < bytes; off += s.bytes) {
    std::memcpy(&data[off], &d, 2);
    if (type == GgmlType::Q4_1) std::memcpy(&data[off + 2], &m, 2);
  }
  return data;
}

bool g_cpu_time = false;  // --cpu-time: this thread's CPU time (robust on a busy machine, 1 thread only)

double now_seconds() {
  if (g_cpu_time) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + ts.tv_nsec * 1e-9;
  }
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

template <typename Fn>
double median_seconds(int reps, Fn&& fn) {
  std::vector<double> t;
  fn();  // warm-up
  for (int i = 0; i < reps; ++i) {
    const double a = now_seconds();
    fn();
    t.push_back(now_seconds() - a);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct MatShape {
  const char* name;
  GgmlType type;
  std::int64_t rows, cols;
  int per_layer;  // occurrences per layer (0: once per model)
};

constexpr MatShape kShapes[] = {
    {"attn_q/attn_output 576x576", GgmlType::Q4_1, 576, 576, 2},
    {"attn_k/attn_v 192x576", GgmlType::Q4_1, 192, 576, 2},
    {"ffn_gate/ffn_up 1536x576", GgmlType::Q4_1, 1536, 576, 2},
    {"ffn_down 576x1536", GgmlType::Q4_1, 576, 1536, 1},
    {"output 49152x576", GgmlType::Q8_0, 49152, 576, 0},
};
constexpr int kLayers = 30;

void bench_matrices(ThreadPool& pool, bool quick) {
  std::mt19937 rng(42);
  std::printf("\n== per matrix, %d thread(s), %s ==\n", pool.num_threads(), use_avx512() ? "AVX-512 VNNI" : "AVX2");
  std::printf("%-30s %5s %10s %8s %10s %9s %9s\n", "matrix", "type", "m=1 us", "GB/s", "m=512 ms", "GFLOP/s", "tok/s");
  double decode_s = 0, prefill_s = 0;
  for (const MatShape& s : kShapes) {
    const std::size_t bytes = row_bytes(s.type, s.cols) * s.rows;
    // Enough copies to stream >= 96 MB per sweep, so GEMV reads come from DRAM.
    const int copies = int(std::max<std::size_t>(1, (96u << 20) / bytes));
    std::vector<std::vector<std::uint8_t>> mats;
    for (int c = 0; c < copies; ++c) mats.push_back(random_matrix(rng, s.type, s.rows, s.cols));
    std::vector<float> x(512 * s.cols), y(512 * s.rows);
    for (auto& v : x) v = std::uniform_real_distribution<float>(-1, 1)(rng);
    int next = 0;
    const double t1 = median_seconds(quick ? 50 : 400, [&] {
      const WeightMatrix w{s.type, mats[next].data(), s.rows, s.cols};
      next = (next + 1) % copies;
      matmul(w, x.data(), 1, y.data(), pool);
    });
    const WeightMatrix w0{s.type, mats[0].data(), s.rows, s.cols};
    const double t512 = median_seconds(quick ? 2 : 5, [&] { matmul(w0, x.data(), 512, y.data(), pool); });
    const double flops = 2.0 * s.rows * s.cols * 512;
    std::printf("%-30s %5s %10.1f %8.2f %10.3f %9.1f %9.0f\n", s.name, type_name(s.type), t1 * 1e6, bytes / t1 / 1e9,
                t512 * 1e3, flops / t512 / 1e9, 512 / t512);
    const int count = s.per_layer ? s.per_layer * kLayers : 1;
    decode_s += count * t1;
    prefill_s += count * t512;
  }
  std::printf("model matmuls (sum of the rows above x occurrences): decode %.2f ms/token -> %.0f tok/s; "
              "prefill 512 tokens %.1f ms -> %.0f tok/s\n",
              decode_s * 1e3, 1 / decode_s, prefill_s * 1e3, 512 / prefill_s);
}

// A whole decode step's matmuls over distinct weights (98 MB), in model order.
void bench_model_sweep(ThreadPool& pool, bool quick) {
  std::mt19937 rng(7);
  struct Mat {
    std::vector<std::uint8_t> data;
    WeightMatrix w;
  };
  std::vector<Mat> mats;
  std::size_t total = 0;
  for (int l = 0; l < kLayers; ++l) {
    for (const MatShape& s : kShapes) {
      if (s.per_layer == 0) continue;
      for (int k = 0; k < s.per_layer; ++k) {
        mats.push_back({random_matrix(rng, s.type, s.rows, s.cols), {}});
        mats.back().w = {s.type, mats.back().data.data(), s.rows, s.cols};
        total += mats.back().data.size();
      }
    }
  }
  mats.push_back({random_matrix(rng, GgmlType::Q8_0, 49152, 576), {}});
  mats.back().w = {GgmlType::Q8_0, mats.back().data.data(), 49152, 576};
  total += mats.back().data.size();
  for (int m : {1, 8}) {
    std::vector<float> x(std::size_t(m) * 1536, 0.5f), y(std::size_t(m) * 49152);
    const double t = median_seconds(quick ? 5 : 20, [&] {
      for (const Mat& mat : mats) matmul(mat.w, x.data(), m, y.data(), pool);
    });
    std::printf("model sweep m=%d, %d thread(s): %.2f ms per step (%.1f MB, %.1f GB/s) -> %.0f tok/s (matmuls only)\n",
                m, pool.num_threads(), t * 1e3, total / 1e6, total / t / 1e9, m / t);
  }
}

void bench_attention(ThreadPool& pool) {
  std::mt19937 rng(3);
  const int ps = 16, hd = 64, qh = 9, kvh = 3;
  for (auto [rows, first] : {std::pair{1, 511}, std::pair{1, 1023}, std::pair{512, 0}}) {
    const int total = first + rows, pages = (total + ps - 1) / ps;
    std::vector<std::uint16_t> kv(std::size_t(pages) * kvh * ps * hd, fp32_to_fp16(0.1f));
    std::vector<const std::uint16_t*> ptrs(pages);
    for (int p = 0; p < pages; ++p) ptrs[p] = kv.data() + std::size_t(p) * kvh * ps * hd;
    std::vector<float> q(std::size_t(rows) * qh * hd, 0.3f), out(q.size());
    PagedAttentionArgs a{q.data(), out.data(), rows, first, qh, kvh, hd, ps, ptrs.data(), ptrs.data(), 0.125f};
    const double t = median_seconds(rows == 1 ? 200 : 5, [&] { paged_attention(a, pool); });
    std::printf("attention rows=%d first_pos=%d, %d thread(s): %.1f us per layer (x30 = %.2f ms)\n", rows, first,
                pool.num_threads(), t * 1e6, 30 * t * 1e3);
  }
}

// 8 sequences decoding one token each after a shared 1024-token prefix (same physical
// pages) plus 32 tokens of their own: one paged_attention per sequence vs one batch call.
void bench_batched_decode_attention(ThreadPool& pool) {
  const int ps = 16, hd = 64, qh = 9, kvh = 3, prefix = 1024, own = 32, n = 8;
  const std::size_t page_elems = std::size_t(kvh) * ps * hd;
  std::vector<std::uint16_t> shared(std::size_t(prefix / ps) * page_elems, fp32_to_fp16(0.1f));
  std::vector<std::vector<std::uint16_t>> own_pages(n, std::vector<std::uint16_t>(std::size_t(own / ps + 1) * page_elems, fp32_to_fp16(0.2f)));
  std::vector<std::vector<const std::uint16_t*>> tables(n);
  std::vector<std::vector<float>> q(n, std::vector<float>(qh * hd, 0.3f)), out(n, std::vector<float>(qh * hd));
  std::vector<PagedAttentionArgs> args(n);
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < prefix / ps; ++p) tables[i].push_back(shared.data() + p * page_elems);
    for (int p = 0; p <= own / ps; ++p) tables[i].push_back(own_pages[i].data() + p * page_elems);
    args[i] = {q[i].data(), out[i].data(), 1, prefix + own, qh, kvh, hd, ps, tables[i].data(), tables[i].data(), 0.125f};
  }
  const double separate = median_seconds(100, [&] { for (auto& a : args) paged_attention(a, pool); });
  const double batched = median_seconds(100, [&] { paged_attention_batch(args.data(), n, pool); });
  std::printf("decode attention, 8 sequences at position %d sharing a %d-token prefix, %d thread(s): "
              "separate %.1f us, batched %.1f us per layer (x30 = %.2f vs %.2f ms per step)\n",
              prefix + own, prefix, pool.num_threads(), separate * 1e6, batched * 1e6, 30 * separate * 1e3,
              30 * batched * 1e3);
}

void bench_pool(ThreadPool& pool) {
  const int calls = 20000;
  volatile std::int64_t sink = 0;
  const auto a = Clock::now();
  for (int i = 0; i < calls; ++i) pool.parallel_for(64, [&](int, std::int64_t b, std::int64_t e) { sink = sink + (e - b); });
  const double t = std::chrono::duration<double>(Clock::now() - a).count();
  std::printf("parallel_for overhead, %d thread(s): %.2f us per call\n", pool.num_threads(), t / calls * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads = {1, 2};
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) threads = {std::atoi(argv[++i])};
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--cpu-time")) g_cpu_time = true;
    else {
      std::fprintf(stderr, "usage: %s [--threads N] [--quick] [--cpu-time]\n", argv[0]);
      return 2;
    }
  }
  std::printf("ISA: %s (set ARBOR_NO_AVX512=1 for the AVX2 paths)\n", use_avx512() ? "AVX-512 VNNI" : "AVX2");
  for (int n : threads) {
    ThreadPool pool(n);
    bench_pool(pool);
    bench_matrices(pool, quick);
    bench_model_sweep(pool, quick);
    bench_attention(pool);
    bench_batched_decode_attention(pool);
  }
  return 0;
}

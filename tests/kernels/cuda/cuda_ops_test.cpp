// The CUDA element-wise and row-wise ops against the CPU references, on random inputs
// with odd sizes: embedding, RMSNorm (alone and fused with the residual add), RoPE with
// the K/V scatter into pages (GGUF adjacent-pair layout, large positions), SwiGLU,
// residual add, row gather, greedy argmax.
#include "kernels/cuda/draw.hpp"
#include "kernels/cuda/ops.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "cuda_test_util.hpp"
#include "kernels/kernel_test_util.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/ops.hpp"

namespace arbor::kernels::cuda {
namespace {

using kernels::testing::random_floats;
using kernels::testing::random_weights;
using testing::to_device;
using testing::to_host;
using testing::worst_ratio;

// Rows 2 and 4 are future tokens (model::future_token), their ids read from `futures`.
TEST(CudaOps, EmbeddingMatchesDequantizedRows) {
  ARBOR_REQUIRE_CUDA();
  std::mt19937 rng(1);
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::F32}) {
    const std::int64_t vocab = 37, cols = 96;
    const auto bytes = random_weights(rng, type, vocab, cols);
    const std::vector<std::int32_t> tokens = {0, 36, 5, 5, 17}, fed = {0, 36, -1, 5, -2}, futures = {5, 17};
    DeviceBuffer d_table;
    const DeviceMatrix table = testing::upload(type, bytes, vocab, cols, d_table);
    auto d_fed = to_device(fed);
    auto d_futures = to_device(futures);
    DeviceBuffer d_out = to_device(std::vector<float>(tokens.size() * cols));
    embed(table, d_fed.as<std::int32_t>(), d_futures.as<std::int32_t>(), int(tokens.size()), d_out.as<float>(),
          nullptr);
    const auto got = to_host<float>(d_out, tokens.size() * cols);
    std::vector<float> want(tokens.size() * cols);
    for (std::size_t r = 0; r < tokens.size(); ++r)
      cpu::dequantize_row(WeightMatrix{type, bytes.data(), vocab, cols}, tokens[r], &want[r * cols]);
    // The same arithmetic, up to a fused multiply-add in Q4_1's d * q + m.
    EXPECT_LE(worst_ratio(got, want, 1e-7, 1e-6), 1.0) << type_name(type);
  }
}

TEST(CudaOps, RmsNormMatchesReference) {
  ARBOR_REQUIRE_CUDA();
  std::mt19937 rng(2);
  for (int n : {1, 31, 576, 4097}) {
    const int rows = 3;
    const auto x = random_floats(rng, std::size_t(rows) * n, -3.f, 3.f);
    const auto w = random_floats(rng, std::size_t(n), 0.5f, 1.5f);
    auto dx = to_device(x), dw = to_device(w);
    DeviceBuffer dy = to_device(std::vector<float>(x.size()));
    rmsnorm(dx.as<float>(), dw.as<float>(), rows, n, 1e-5f, dy.as<float>(), nullptr);
    std::vector<float> want(x.size());
    for (int r = 0; r < rows; ++r) cpu::rmsnorm_reference(&x[std::size_t(r) * n], w.data(), n, 1e-5f, &want[std::size_t(r) * n]);
    EXPECT_LE(worst_ratio(to_host<float>(dy, x.size()), want, 1e-6, 1e-5), 1.0) << "n = " << n;
  }
}

TEST(CudaOps, AddRmsNormUpdatesTheResidualAndNormsIt) {
  ARBOR_REQUIRE_CUDA();
  std::mt19937 rng(3);
  for (int n : {1, 31, 576, 4097}) {
    const int rows = 3;
    const auto x = random_floats(rng, std::size_t(rows) * n, -3.f, 3.f), y = random_floats(rng, std::size_t(rows) * n);
    const auto w = random_floats(rng, std::size_t(n), 0.5f, 1.5f);
    auto dx = to_device(x), dy = to_device(y), dw = to_device(w);
    DeviceBuffer d_out = to_device(std::vector<float>(x.size()));
    add_rmsnorm(dx.as<float>(), dy.as<float>(), dw.as<float>(), rows, n, 1e-5f, d_out.as<float>(), nullptr);
    std::vector<float> sum(x.size()), want(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + y[i];
    for (int r = 0; r < rows; ++r)
      cpu::rmsnorm_reference(&sum[std::size_t(r) * n], w.data(), n, 1e-5f, &want[std::size_t(r) * n]);
    EXPECT_EQ(to_host<float>(dx, x.size()), sum) << "n = " << n;
    EXPECT_LE(worst_ratio(to_host<float>(d_out, x.size()), want, 1e-6, 1e-5), 1.0) << "n = " << n;
  }
}

TEST(CudaOps, SwiGluAddAndGatherMatchReference) {
  ARBOR_REQUIRE_CUDA();
  std::mt19937 rng(4);
  const std::size_t n = 1537;
  const auto gate = random_floats(rng, n, -8.f, 8.f), up = random_floats(rng, n);
  auto dg = to_device(gate), du = to_device(up);
  silu_mul(dg.as<float>(), du.as<float>(), std::int64_t(n), nullptr);
  std::vector<float> want = gate;
  cpu::silu_mul_reference(want.data(), up.data(), int(n));
  EXPECT_LE(worst_ratio(to_host<float>(dg, n), want, 1e-6, 1e-5), 1.0);

  const auto x = random_floats(rng, n), y = random_floats(rng, n);
  auto dx = to_device(x), dy = to_device(y);
  add_inplace(dx.as<float>(), dy.as<float>(), std::int64_t(n), nullptr);
  const auto sum = to_host<float>(dx, n);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(sum[i], x[i] + y[i]) << i;

  const int width = 29;
  const std::vector<std::int32_t> rows = {4, 0, 52};
  auto d_rows = to_device(rows);
  DeviceBuffer d_out = to_device(std::vector<float>(rows.size() * width));
  gather_rows(dx.as<float>(), d_rows.as<std::int32_t>(), int(rows.size()), width, d_out.as<float>(), nullptr);
  const auto gathered = to_host<float>(d_out, rows.size() * width);
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (int c = 0; c < width; ++c) ASSERT_EQ(gathered[r * width + c], sum[std::size_t(rows[r]) * width + c]);
}

// A greedy draw is the row's argmax by the CPU's rule: lowest index among equal maxima
// (rows of few distinct values, so maxima repeat across threads and warps), -inf skipped
// like any small value, NaNs skipped, an all-NaN row gives 0. (Sampled draws:
// tests/model/cuda/token_draw_cuda_test.cpp, against the model's rule.)
TEST(CudaOps, GreedyDrawsAreTheRowsArgmax) {
  ARBOR_REQUIRE_CUDA();
  std::mt19937 rng(6);
  for (int n : {1, 31, 257, 49152}) {
    const int rows = 5;
    auto x = random_floats(rng, std::size_t(rows) * n, -3.f, 3.f);
    for (auto& v : x) v = std::round(v);
    for (int k = 0; k < rows * n / 7; ++k) x[rng() % x.size()] = -INFINITY;
    for (int k = 0; k < rows; ++k) x[rng() % x.size()] = NAN;
    for (int i = 0; i < n; ++i) x[std::size_t(3) * n + i] = NAN;  // row 3: all NaN
    auto dx = to_device(x);
    DeviceBuffer d_out = to_device(std::vector<std::int32_t>(rows, -7));
    std::vector<RowDraw> greedy(rows);
    greedy[1].temperature = 0.7f;  // greedy too: top_k 1
    greedy[1].top_k = 1;
    const DeviceBuffer d_draws = to_device(greedy);
    draw_rows(dx.as<float>(), d_draws.as<const RowDraw>(), rows, n, d_out.as<std::int32_t>(), nullptr);
    const auto got = to_host<std::int32_t>(d_out, rows);
    for (int r = 0; r < rows; ++r)
      EXPECT_EQ(got[std::size_t(r)], cpu::argmax_reference(&x[std::size_t(r) * n], n)) << "n " << n << " row " << r;
  }
}

// A sampled draw walks the kept mass in id order: two equal logits among -inf ones
// share it evenly (uniform below 1/2: the first; from 1/2: the second), whatever the
// temperature; top_p below the first's share still keeps both (ties at the edge), and a
// top_k of 1 is greedy (the first). (The whole rule: tests/model/cuda/token_draw_cuda_test.cpp.)
TEST(CudaOps, SampledDrawsSplitTheMassInIdOrder) {
  ARBOR_REQUIRE_CUDA();
  const int n = 3000, first = 700, second = 2900;
  struct Case {
    RowDraw draw;
    std::int32_t expected;
  };
  const Case cases[] = {{{1.f, 0, 1.f, 0.1f}, first},    {{1.f, 0, 1.f, 0.49f}, first},
                        {{0.3f, 0, 1.f, 0.51f}, second}, {{2.f, 0, 1.f, 0.99f}, second},
                        {{1.f, 0, 0.4f, 0.8f}, second},  {{1.f, 2, 1.f, 0.7f}, second},
                        {{1.f, 1, 1.f, 0.9f}, first}};
  const int rows = int(std::size(cases));
  std::vector<float> x(std::size_t(rows) * n, -INFINITY);
  std::vector<RowDraw> draws;
  for (int r = 0; r < rows; ++r) {
    x[std::size_t(r) * n + first] = x[std::size_t(r) * n + second] = 1.5f;
    draws.push_back(cases[r].draw);
  }
  auto dx = to_device(x);
  const DeviceBuffer d_draws = to_device(draws);
  DeviceBuffer d_out = to_device(std::vector<std::int32_t>(std::size_t(rows), -7));
  draw_rows(dx.as<float>(), d_draws.as<const RowDraw>(), rows, n, d_out.as<std::int32_t>(), nullptr);
  const auto got = to_host<std::int32_t>(d_out, std::size_t(rows));
  for (int r = 0; r < rows; ++r) EXPECT_EQ(got[std::size_t(r)], cases[r].expected) << "case " << r;
}

// Masked rows (the listed ones, in any order) keep the logits their words allow, bit
// i % 32 of word i / 32 of their own mask; the rest of them becomes -inf; rows not
// listed are left as they were. A width that is not a whole number of words.
TEST(CudaOps, MaskRowsSetsWhatEachMaskForbidsToMinusInfinity) {
  ARBOR_REQUIRE_CUDA();
  std::mt19937 rng(9);
  const int rows = 4, n = 1000, words_per_row = (n + 31) / 32;
  const auto x = random_floats(rng, std::size_t(rows) * n, -3.f, 3.f);
  const std::vector<std::int32_t> masked = {3, 1};
  std::vector<std::uint32_t> words(masked.size() * words_per_row);
  for (auto& w : words) w = std::uint32_t(rng());
  auto dx = to_device(x);
  const auto d_masked = to_device(masked);
  const auto d_words = to_device(words);
  mask_rows(dx.as<float>(), d_masked.as<const std::int32_t>(), d_words.as<const std::uint32_t>(),
            int(masked.size()), words_per_row, n, nullptr);
  const auto got = to_host<float>(dx, x.size());
  for (int r = 0; r < rows; ++r) {
    const auto k = std::find(masked.begin(), masked.end(), r) - masked.begin();
    for (int i = 0; i < n; ++i) {
      const std::size_t at = std::size_t(r) * n + std::size_t(i);
      const bool allowed = k == std::ptrdiff_t(masked.size()) ||
                           (words[std::size_t(k) * words_per_row + std::size_t(i / 32)] >> (i % 32)) & 1u;
      ASSERT_EQ(got[at], allowed ? x[at] : -INFINITY) << "row " << r << " logit " << i;
    }
  }
}

// RoPE and the K/V store in one launch: q rotated in place as kernels::cpu::rope does
// (large positions, partial rotary, an odd head_dim); rotated k and v land in (page,
// slot) through the page table, as f16, at the layer's K and V offsets; nothing else in
// the pool changes, and k and v are left as they were.
TEST(CudaOps, RopeStoreKvRotatesQAndStoresRotatedKAndVInTheirSlots) {
  ARBOR_REQUIRE_CUDA();
  std::mt19937 rng(5);
  struct Case { int q_heads, kv_heads, head_dim, rot_dim; float theta; };
  for (const Case c : {Case{9, 3, 64, 64, 100000.f}, Case{8, 2, 128, 128, 500000.f}, Case{3, 1, 80, 64, 10000.f},
                       Case{2, 1, 81, 64, 10000.f}}) {
    SCOPED_TRACE("head_dim " + std::to_string(c.head_dim));
    const int layers = 3, page_size = 4, num_pages = 7, layer = 1;
    const std::vector<std::int32_t> positions = {0, 1, 7, 1000, 8191, 131071};
    const std::vector<std::int32_t> row_page = {5, 5, 2, 0, 6, 3}, row_slot = {3, 0, 1, 3, 2, 0};
    const int rows = int(positions.size()), q_dim = c.q_heads * c.head_dim, kv_dim = c.kv_heads * c.head_dim;
    const auto q = random_floats(rng, std::size_t(rows) * q_dim);
    const auto k = random_floats(rng, std::size_t(rows) * kv_dim), v = random_floats(rng, std::size_t(rows) * kv_dim);
    const std::int64_t block = std::int64_t(c.kv_heads) * page_size * c.head_dim, per_page = 2 * layers * block;
    const std::vector<std::uint16_t> pool(static_cast<std::size_t>(per_page * num_pages), 0x1234);
    auto d_pool = to_device(pool);
    auto dq = to_device(q), dk = to_device(k), dv = to_device(v);
    auto d_pos = to_device(positions), d_page = to_device(row_page), d_slot = to_device(row_slot);
    KvLayerView view;
    view.kv_base = d_pool.as<std::uint16_t>();
    view.elements_per_page = per_page;
    view.k_offset = (std::int64_t(layer) * 2 + 0) * block;
    view.v_offset = (std::int64_t(layer) * 2 + 1) * block;
    view.num_kv_heads = c.kv_heads;
    view.head_dim = c.head_dim;
    view.page_size = page_size;
    rope_store_kv(dq.as<float>(), dk.as<float>(), dv.as<float>(), d_pos.as<std::int32_t>(), rows, c.q_heads, c.rot_dim,
                  c.theta, d_page.as<std::int32_t>(), d_slot.as<std::int32_t>(), view, nullptr);

    std::vector<float> want_q = q, want_k = k;
    for (int r = 0; r < rows; ++r) {
      const int pos = positions[std::size_t(r)];
      cpu::rope_reference(&want_q[std::size_t(r) * q_dim], c.q_heads, c.head_dim, c.rot_dim, pos, c.theta);
      cpu::rope_reference(&want_k[std::size_t(r) * kv_dim], c.kv_heads, c.head_dim, c.rot_dim, pos, c.theta);
    }
    EXPECT_LE(worst_ratio(to_host<float>(dq, q.size()), want_q, 2e-6, 2e-6), 1.0);
    EXPECT_EQ(to_host<float>(dk, k.size()), k);
    EXPECT_EQ(to_host<float>(dv, v.size()), v);
    auto got = to_host<std::uint16_t>(d_pool, pool.size());
    std::vector<float> got_k, stored_want_k;
    for (int r = 0; r < rows; ++r)
      for (int h = 0; h < c.kv_heads; ++h)
        for (int d = 0; d < c.head_dim; ++d) {
          const std::size_t at = std::size_t(row_page[std::size_t(r)] * per_page +
                                             (std::int64_t(h) * page_size + row_slot[std::size_t(r)]) * c.head_dim + d);
          const std::size_t src = std::size_t(r * kv_dim + h * c.head_dim + d);
          // K went through the rotation (a float rounding apart from the CPU's: compared
          // after f16), V is stored exactly.
          got_k.push_back(fp16_to_fp32_scalar(got[std::size_t(view.k_offset) + at]));
          stored_want_k.push_back(want_k[src]);
          ASSERT_EQ(got[std::size_t(view.v_offset) + at], fp32_to_fp16_scalar(v[src])) << "row " << r << " d " << d;
          got[std::size_t(view.k_offset) + at] = got[std::size_t(view.v_offset) + at] = 0x1234;
        }
    EXPECT_LE(worst_ratio(got_k, stored_want_k, 1e-7, 1.1e-3), 1.0);
    EXPECT_EQ(got, pool) << "an element outside the rows' slots changed";
  }
}

}  // namespace
}  // namespace arbor::kernels::cuda

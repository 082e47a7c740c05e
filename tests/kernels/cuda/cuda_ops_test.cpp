// The CUDA element-wise and row-wise ops against the CPU references, on random inputs
// with odd sizes: embedding, RMSNorm, RoPE (GGUF adjacent-pair layout, large positions),
// SwiGLU, residual add, row gather, and the K/V scatter into pages.
#include "kernels/cuda/ops.hpp"

#include <gtest/gtest.h>

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

TEST(CudaOps, EmbeddingMatchesDequantizedRows) {
  ARBOR_REQUIRE_CUDA();
  std::mt19937 rng(1);
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::F32}) {
    const std::int64_t vocab = 37, cols = 96;
    const auto bytes = random_weights(rng, type, vocab, cols);
    const std::vector<std::int32_t> tokens = {0, 36, 5, 5, 17};
    auto d_table = to_device(bytes);
    auto d_tokens = to_device(tokens);
    DeviceBuffer d_out = to_device(std::vector<float>(tokens.size() * cols));
    embed(DeviceMatrix{type, d_table.data(), vocab, cols}, d_tokens.as<std::int32_t>(), int(tokens.size()),
          d_out.as<float>(), nullptr);
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

TEST(CudaOps, RopeMatchesReferenceAtLargePositions) {
  ARBOR_REQUIRE_CUDA();
  std::mt19937 rng(3);
  struct Case { int heads, head_dim, rot_dim; float theta; };
  for (const Case c : {Case{9, 64, 64, 100000.f}, Case{8, 128, 128, 500000.f}, Case{3, 80, 64, 10000.f}}) {
    const std::vector<std::int32_t> positions = {0, 1, 7, 1000, 8191, 131071};
    const int rows = int(positions.size()), width = c.heads * c.head_dim;
    const auto x = random_floats(rng, std::size_t(rows) * width);
    auto dx = to_device(x);
    auto dp = to_device(positions);
    rope(dx.as<float>(), dp.as<std::int32_t>(), rows, c.heads, c.head_dim, c.rot_dim, c.theta, nullptr);
    std::vector<float> want = x;
    for (int r = 0; r < rows; ++r)
      cpu::rope_reference(&want[std::size_t(r) * width], c.heads, c.head_dim, c.rot_dim, positions[std::size_t(r)], c.theta);
    EXPECT_LE(worst_ratio(to_host<float>(dx, x.size()), want, 2e-6, 2e-6), 1.0) << c.head_dim;
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

// Each row's argmax equals the CPU's rule: lowest index among equal maxima (rows of few
// distinct values, so maxima repeat across threads and warps), -inf skipped like any
// small value, NaNs skipped, an all-NaN row gives 0.
TEST(CudaOps, ArgmaxRowsMatchReference) {
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
    argmax_rows(dx.as<float>(), rows, n, d_out.as<std::int32_t>(), nullptr);
    const auto got = to_host<std::int32_t>(d_out, rows);
    for (int r = 0; r < rows; ++r)
      EXPECT_EQ(got[std::size_t(r)], cpu::argmax_reference(&x[std::size_t(r) * n], n)) << "n " << n << " row " << r;
  }
}

// Rows land in (page, slot) through the page table, as f16, at the layer's K and V
// offsets, and nothing else in the pool changes.
TEST(CudaOps, StoreKvWritesEachRowIntoItsSlot) {
  ARBOR_REQUIRE_CUDA();
  std::mt19937 rng(5);
  const int layers = 3, kv_heads = 2, head_dim = 64, page_size = 4, num_pages = 7, layer = 1;
  const std::int64_t per_page = std::int64_t(2) * layers * kv_heads * page_size * head_dim;
  const std::vector<std::int32_t> row_page = {5, 5, 2, 0}, row_slot = {3, 0, 1, 3};
  const int rows = int(row_page.size()), kv_dim = kv_heads * head_dim;
  const auto k = random_floats(rng, std::size_t(rows) * kv_dim), v = random_floats(rng, std::size_t(rows) * kv_dim);
  std::vector<std::uint16_t> pool(static_cast<std::size_t>(per_page * num_pages), 0x1234);
  auto d_pool = to_device(pool);
  auto dk = to_device(k), dv = to_device(v), dp = to_device(row_page), ds = to_device(row_slot);
  KvLayerView view;
  view.kv_base = d_pool.as<std::uint16_t>();
  view.elements_per_page = per_page;
  view.k_offset = (std::int64_t(layer) * 2 + 0) * kv_heads * page_size * head_dim;
  view.v_offset = (std::int64_t(layer) * 2 + 1) * kv_heads * page_size * head_dim;
  view.num_kv_heads = kv_heads;
  view.head_dim = head_dim;
  view.page_size = page_size;
  store_kv(dk.as<float>(), dv.as<float>(), rows, dp.as<std::int32_t>(), ds.as<std::int32_t>(), view, nullptr);
  std::vector<std::uint16_t> want = pool;
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < kv_heads; ++h)
      for (int d = 0; d < head_dim; ++d) {
        const std::int64_t at = row_page[std::size_t(r)] * per_page + (std::int64_t(h) * page_size + row_slot[std::size_t(r)]) * head_dim + d;
        want[std::size_t(view.k_offset + at)] = fp32_to_fp16_scalar(k[std::size_t(r * kv_dim + h * head_dim + d)]);
        want[std::size_t(view.v_offset + at)] = fp32_to_fp16_scalar(v[std::size_t(r * kv_dim + h * head_dim + d)]);
      }
  EXPECT_EQ(to_host<std::uint16_t>(d_pool, pool.size()), want);
}

}  // namespace
}  // namespace arbor::kernels::cuda

// CUDA paged attention against the CPU reference (gather + full softmax) on random
// paged K/V: GQA, page sizes 1/4/16 with scrambled page tables, partial last pages,
// prefill chunks after a cached prefix, batched decode rows of several sequences, and
// contexts long enough to be split (and merged) across warps.
#include "kernels/cuda/attention.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "cuda_test_util.hpp"
#include "kernels/kernel_test_util.hpp"
#include "kernels/cpu/attention.hpp"

namespace arbor::kernels::cuda {
namespace {

using kernels::testing::random_floats;
using testing::to_device;
using testing::to_host;
using testing::worst_ratio;

struct Sequence {
  int first_pos = 0, num_rows = 0;  // rows at positions first_pos .. first_pos + num_rows - 1
};

struct Case {
  int q_heads, kv_heads, head_dim, page_size;
  std::vector<Sequence> seqs;
};

void run_case(const Case& c, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const int layers = 2, layer = 1;
  const std::int64_t block = std::int64_t(c.kv_heads) * c.page_size * c.head_dim;
  const std::int64_t per_page = 2 * layers * block;
  const std::int64_t k_offset = (std::int64_t(layer) * 2) * block, v_offset = k_offset + block;
  int total_pages = 0, total_rows = 0;
  for (const Sequence& s : c.seqs) {
    total_pages += (s.first_pos + s.num_rows + c.page_size - 1) / c.page_size;
    total_rows += s.num_rows;
  }
  // Physical pages in scrambled order; random f16 contents everywhere.
  std::vector<std::int32_t> physical(static_cast<std::size_t>(total_pages));
  std::iota(physical.begin(), physical.end(), 0);
  std::shuffle(physical.begin(), physical.end(), rng);
  std::vector<std::uint16_t> pool(static_cast<std::size_t>(per_page * total_pages));
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (auto& h : pool) h = fp32_to_fp16_scalar(dist(rng));
  const int width = c.q_heads * c.head_dim;
  const auto q = random_floats(rng, std::size_t(total_rows) * width);

  std::vector<std::int32_t> row_pos, row_table;
  std::vector<float> want(q.size());
  std::vector<std::vector<const std::uint16_t*>> k_ptrs(c.seqs.size()), v_ptrs(c.seqs.size());
  int row = 0, page = 0, max_positions = 0;
  for (std::size_t i = 0; i < c.seqs.size(); ++i) {
    const Sequence& s = c.seqs[i];
    const int pages = (s.first_pos + s.num_rows + c.page_size - 1) / c.page_size;
    for (int p = 0; p < pages; ++p) {
      const std::uint16_t* base = pool.data() + physical[std::size_t(page + p)] * per_page;
      k_ptrs[i].push_back(base + k_offset);
      v_ptrs[i].push_back(base + v_offset);
    }
    cpu::PagedAttentionArgs a;
    a.q = &q[std::size_t(row) * width];
    a.out = &want[std::size_t(row) * width];
    a.num_rows = s.num_rows;
    a.first_pos = s.first_pos;
    a.num_q_heads = c.q_heads;
    a.num_kv_heads = c.kv_heads;
    a.head_dim = c.head_dim;
    a.page_size = c.page_size;
    a.k_pages = k_ptrs[i].data();
    a.v_pages = v_ptrs[i].data();
    a.scale = 1.f / std::sqrt(float(c.head_dim));
    cpu::paged_attention_reference(a);
    for (int j = 0; j < s.num_rows; ++j) {
      row_pos.push_back(s.first_pos + j);
      row_table.push_back(page);
    }
    max_positions = std::max(max_positions, s.first_pos + s.num_rows);
    row += s.num_rows;
    page += pages;
  }

  auto d_pool = to_device(pool);
  auto d_q = to_device(q);
  auto d_pos = to_device(row_pos), d_table = to_device(row_table), d_pages = to_device(physical);
  DeviceBuffer d_out = to_device(std::vector<float>(q.size()));
  PagedAttentionBatch b;
  b.q = d_q.as<float>();
  b.out = d_out.as<float>();
  b.num_rows = total_rows;
  b.row_pos = d_pos.as<std::int32_t>();
  b.row_table = d_table.as<std::int32_t>();
  b.page_table = d_pages.as<std::int32_t>();
  b.kv_base = d_pool.as<std::uint16_t>();
  b.elements_per_page = per_page;
  b.k_offset = k_offset;
  b.v_offset = v_offset;
  b.num_q_heads = c.q_heads;
  b.num_kv_heads = c.kv_heads;
  b.head_dim = c.head_dim;
  b.page_size = c.page_size;
  b.max_positions = max_positions;
  b.scale = 1.f / std::sqrt(float(c.head_dim));
  DeviceBuffer scratch;
  std::string error;
  ASSERT_TRUE(scratch.reserve(attention_scratch_bytes(b), &error)) << error;
  paged_attention(b, scratch.as<float>(), nullptr);
  EXPECT_LE(worst_ratio(to_host<float>(d_out, q.size()), want, 1e-5, 1e-4), 1.0)
      << "heads " << c.q_heads << "/" << c.kv_heads << " head_dim " << c.head_dim << " page " << c.page_size
      << " splits " << attention_splits(b);
}

TEST(CudaAttention, PrefillAfterACachedPrefixMatchesReference) {
  ARBOR_REQUIRE_CUDA();
  for (int page_size : {1, 4, 16})
    run_case({9, 3, 64, page_size, {{0, 23}, {37, 14}}}, 11 + std::uint32_t(page_size));
}

TEST(CudaAttention, BatchedDecodeRowsOfManySequencesMatchReference) {
  ARBOR_REQUIRE_CUDA();
  run_case({32, 8, 128, 16, {{0, 1}, {15, 1}, {16, 1}, {100, 1}, {511, 1}}}, 12);
  run_case({8, 8, 80, 4, {{3, 1}, {0, 1}, {6, 1}}}, 13);  // no GQA, head_dim not a power of two
}

TEST(CudaAttention, LongContextsSplitAndMergeLikeOnePass) {
  ARBOR_REQUIRE_CUDA();
  run_case({32, 8, 128, 16, {{4000, 1}, {7000, 2}}}, 14);  // decode: splits of the context
  run_case({4, 1, 64, 16, {{1900, 300}}}, 15);              // a prefill chunk late in a long context
}

}  // namespace
}  // namespace arbor::kernels::cuda

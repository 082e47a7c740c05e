// CUDA paged attention against the CPU reference (gather + full softmax) on random
// paged K/V: GQA, page sizes 1/4/16 with scrambled page tables, partial last pages,
// prefill chunks after a cached prefix, batched decode rows of several sequences,
// contexts long enough to be split (and merged) across warps, and decode rows sharing
// prefix pages read once per tile (cascade), planned by plan_shared_prefixes.
#include "kernels/cuda/attention.hpp"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "cuda_test_util.hpp"
#include "kernels/kernel_test_util.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cuda/shared_prefix.hpp"

namespace arbor::kernels::cuda {
namespace {

using kernels::testing::random_floats;
using testing::to_device;
using testing::to_host;
using testing::worst_ratio;

struct Sequence {
  int first_pos = 0, num_rows = 0;  // rows at positions first_pos .. first_pos + num_rows - 1
  int shares = -1, shared_pages = 0;  // its first shared_pages pages are those of sequence `shares`
};

struct Case {
  int q_heads, kv_heads, head_dim, page_size;
  std::vector<Sequence> seqs;
};

// With `cascade`, the rows are planned into shared-prefix tiles as the engine plans them
// (decode rows by shared pages, each prefill run by consecutive rows), and the case
// checks that it made some; `tensor_cores` false keeps their pass on CUDA cores.
void run_case(const Case& c, std::uint32_t seed, bool cascade = false, bool tensor_cores = true) {
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

  // Each sequence's page table: the shared pages of the sequence it shares with, then
  // its own pages (back to back in `physical`, as the kernel reads tables).
  std::vector<std::int32_t> row_pos, row_table, tables;
  std::vector<std::size_t> table_at(c.seqs.size());
  std::vector<float> want(q.size());
  std::vector<std::vector<const std::uint16_t*>> k_ptrs(c.seqs.size()), v_ptrs(c.seqs.size());
  int row = 0, page = 0, max_positions = 0;
  std::vector<DecodeRowPages> decode_rows;
  std::vector<std::size_t> decode_seqs;
  for (std::size_t i = 0; i < c.seqs.size(); ++i) {
    const Sequence& s = c.seqs[i];
    const int pages = (s.first_pos + s.num_rows + c.page_size - 1) / c.page_size;
    table_at[i] = tables.size();
    for (int p = 0; p < pages; ++p) {
      const bool shared = s.shares >= 0 && p < s.shared_pages;
      tables.push_back(shared ? tables[table_at[std::size_t(s.shares)] + std::size_t(p)] : physical[std::size_t(page++)]);
      const std::uint16_t* base = pool.data() + tables.back() * per_page;
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
      row_table.push_back(std::int32_t(table_at[i]));
    }
    if (s.num_rows == 1) {
      decode_rows.push_back({row, s.first_pos, {}});
      decode_seqs.push_back(i);
    }
    max_positions = std::max(max_positions, s.first_pos + s.num_rows);
    row += s.num_rows;
  }
  // The decode rows' page tables, now that `tables` is complete.
  for (std::size_t k = 0; k < decode_rows.size(); ++k)
    decode_rows[k].pages = std::span(tables).subspan(table_at[decode_seqs[k]], k_ptrs[decode_seqs[k]].size());
  SharedPrefixPlan tiles;
  if (cascade) {
    tiles = plan_shared_prefixes(decode_rows, total_rows, c.page_size);
    int first_row = 0;
    for (const Sequence& s : c.seqs) {
      if (s.num_rows > 1) add_prefill_tiles(tiles, first_row, s.first_pos, s.num_rows);
      first_row += s.num_rows;
    }
    EXPECT_GT(tiles.num_tiles(), 0) << "no rows share positions";
  }
  auto d_tile_rows = to_device(tiles.tile_rows), d_tile_length = to_device(tiles.tile_length),
       d_row_start = to_device(tiles.row_start);

  auto d_pool = to_device(pool);
  auto d_q = to_device(q);
  auto d_pos = to_device(row_pos), d_table = to_device(row_table), d_pages = to_device(tables);
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
  b.tensor_cores = tensor_cores;
  if (cascade) {
    b.max_own_positions = max_own_positions(tiles, row_pos);
    b.num_tiles = tiles.num_tiles();
    b.max_tile_length = tiles.max_tile_length;
    b.tile_rows = d_tile_rows.as<std::int32_t>();
    b.tile_length = d_tile_length.as<std::int32_t>();
    b.row_start = d_row_start.as<std::int32_t>();
  }
  DeviceBuffer scratch;
  std::string error;
  ASSERT_TRUE(scratch.reserve(attention_scratch_bytes(b), &error)) << error;
  paged_attention(b, scratch.as<float>(), nullptr);
  // On tensor cores the shared pass rounds queries and softmax weights to f16 (11
  // significant bits): errors up to ~1e-4 (seen: 9.8e-5) on outputs up to ~1; f32 elsewhere.
  const bool f16 = cascade && shared_pass_uses_tensor_cores(b);
  if (!tensor_cores) {
    EXPECT_FALSE(shared_pass_uses_tensor_cores(b)) << "the switch is ignored";
  }
  EXPECT_LE(worst_ratio(to_host<float>(d_out, q.size()), want, f16 ? 5e-4 : 1e-5, f16 ? 1e-3 : 1e-4), 1.0)
      << "heads " << c.q_heads << "/" << c.kv_heads << " head_dim " << c.head_dim << " page " << c.page_size
      << " splits " << attention_splits(b);
}

// Prefill chunks, alone and with their rows in tiles of consecutive rows (the engine's
// plan): 40 rows make two full tiles and one of 8, 14 one partial tile.
TEST(CudaAttention, PrefillAfterACachedPrefixMatchesReference) {
  ARBOR_REQUIRE_CUDA();
  for (bool tiled : {false, true})
    for (int page_size : {1, 4, 16})
      run_case({9, 3, 64, page_size, {{0, 40}, {37, 14}}}, 11 + std::uint32_t(page_size), tiled);
  // head_dim 40 (not a multiple of 16): tiles on CUDA cores, 8 rows a warp.
  run_case({4, 2, 40, 4, {{5, 20}, {0, 11}}}, 22, true);
}

TEST(CudaAttention, BatchedDecodeRowsOfManySequencesMatchReference) {
  ARBOR_REQUIRE_CUDA();
  run_case({32, 8, 128, 16, {{0, 1}, {15, 1}, {16, 1}, {100, 1}, {511, 1}}}, 12);
  run_case({8, 8, 80, 4, {{3, 1}, {0, 1}, {6, 1}}}, 13);  // no GQA, head_dim not a power of two
  run_case({4, 2, 256, 16, {{40, 1}, {17, 1}, {33, 5}}}, 19);  // the widest head (8 elements a lane)
  // A warp takes the query heads of one KV head, up to 4: groups of 8 (two warps a KV
  // head), 7 (one head a warp), 6 at 8 elements a lane (2 heads a warp).
  run_case({16, 2, 64, 16, {{30, 1}, {200, 1}}}, 25);
  run_case({14, 2, 64, 4, {{9, 1}, {70, 1}}}, 26);
  run_case({12, 2, 256, 16, {{50, 1}, {3, 1}}}, 27);
}

TEST(CudaAttention, LongContextsSplitAndMergeLikeOnePass) {
  ARBOR_REQUIRE_CUDA();
  run_case({32, 8, 128, 16, {{4000, 1}, {7000, 2}}}, 14);  // decode: splits of the context
  run_case({4, 1, 64, 16, {{1900, 300}}}, 15);              // a prefill chunk late in a long context
  run_case({4, 1, 64, 16, {{1900, 300}}}, 15, true);        // the same in tiles: split shared passes
  run_case({32, 8, 128, 16, {{7000, 2}, {0, 9}}}, 21, true);  // tiles from two positions of a long row
}

// The measurement switch (ARBOR_CUDA_TENSOR_CORE_ATTENTION=0 in the engine): the same
// tiles on CUDA cores, a warp per 8 rows, within f32 tolerance.
TEST(CudaAttention, SharedPassOnCudaCoresMatchesInF32) {
  ARBOR_REQUIRE_CUDA();
  run_case({9, 3, 64, 4, {{0, 40}, {37, 14}}}, 23, true, false);
  std::vector<Sequence> seqs = {{300, 1}};
  for (int i = 0; i < 20; ++i) seqs.push_back({300 + i, 1, 0, 18});  // a full tile of 16 and one of 5
  run_case({32, 8, 128, 16, seqs}, 24, true, false);
}

// N sub-agents decoding over one SharedPrefix: the rows share their first pages (some
// more than others), plus rows that share nothing and a prefill chunk; each row's
// output equals its own full attention (the CPU reference over its own page table).
TEST(CudaAttention, DecodeRowsSharingPrefixPagesReadThemOncePerTile) {
  ARBOR_REQUIRE_CUDA();
  std::vector<Sequence> seqs = {{300, 1}};
  for (int i = 0; i < 10; ++i) seqs.push_back({300 + 7 * i, 1, 0, 18});  // 18 shared pages, own tails
  seqs.push_back({380, 1, 10, 20});  // 20 pages of the 11th sequence (seq 0's 18, 2 of its own)
  seqs.push_back({40, 1, 0, 2});     // shares a short prefix only
  seqs.push_back({77, 1});           // shares nothing
  seqs.push_back({64, 9, 0, 4});     // a prefill chunk over shared pages: tiles of its own rows
  run_case({9, 3, 64, 16, seqs}, 16, true);
  run_case({32, 8, 128, 16, {{4000, 1}, {4003, 1, 0, 250}, {4100, 1, 0, 250}, {12, 1}}}, 17, true);  // splits too
  run_case({8, 2, 80, 4, {{21, 1}, {22, 1, 0, 5}, {23, 1, 0, 5}}}, 18, true);  // page 4, head_dim 80
  run_case({4, 2, 200, 16, {{50, 1}, {51, 1, 0, 3}, {60, 1, 0, 3}}}, 20, true);  // head_dim 200: 8 a lane
}

// The tensor-core pass gives a block the query heads of one KV head, as many of 4, 3, 2
// as divide the group and fit its shared memory (above: 3 and 4 heads a block): here 2
// heads (groups of 2, heads of 64 and 128 elements), and one (MHA; a 256-wide head, where
// 2 do not fit).
TEST(CudaAttention, SharedPassBlocksOfHeadsOfOneKvHeadMatchReference) {
  ARBOR_REQUIRE_CUDA();
  const std::vector<Sequence> seqs = {{90, 1}, {95, 1, 0, 5}, {100, 1, 0, 5}, {40, 3, 0, 2}};
  run_case({8, 4, 64, 16, seqs}, 28, true);
  run_case({6, 3, 128, 16, seqs}, 29, true);
  run_case({4, 4, 64, 16, seqs}, 30, true);
  run_case({4, 2, 256, 16, seqs}, 31, true);
}

// The planner alone: tiles hold 2..kSharedTileRows rows with the pages they all share
// and all see in full; other rows start at 0.
TEST(SharedPrefixPlan, TilesRowsByTheirLongestCommonLeadingPages) {
  const std::vector<std::int32_t> a = {5, 6, 7, 8}, b = {5, 6, 7, 9}, c = {5, 6, 1}, d = {2, 3}, e = {5, 6, 7, 8};
  std::vector<DecodeRowPages> rows = {{0, 63, a}, {1, 63, b}, {2, 40, c}, {3, 20, d}, {4, 50, e}};
  SharedPrefixPlan plan = plan_shared_prefixes(rows, 6, 16);
  // Sorted: d | c, a, e, b: one tile of c, a, e, b sharing pages 5, 6 (c sees only two).
  ASSERT_EQ(plan.num_tiles(), 1);
  EXPECT_EQ(plan.tile_length[0], 32);
  EXPECT_EQ(std::vector<std::int32_t>(plan.tile_rows.begin(), plan.tile_rows.begin() + 5),
            (std::vector<std::int32_t>{2, 0, 4, 1, -1}));
  EXPECT_EQ(plan.row_start, (std::vector<std::int32_t>{32, 32, 32, 0, 32, 0}));
  // Row e at position 46 sees pages 5, 6 in full but not 7: with a only two pages shared.
  rows = {{0, 63, a}, {1, 46, e}};
  plan = plan_shared_prefixes(rows, 2, 16);
  ASSERT_EQ(plan.num_tiles(), 1);
  EXPECT_EQ(plan.tile_length[0], 32);
  // min_pages: rows sharing fewer pages are not tiled.
  EXPECT_EQ(plan_shared_prefixes(rows, 2, 16, 3).num_tiles(), 0);
  // More rows than a tile holds: several tiles, each full but the last.
  std::vector<DecodeRowPages> many;
  for (int i = 0; i < kSharedTileRows + 3; ++i) many.push_back({i, 70, a});
  plan = plan_shared_prefixes(many, kSharedTileRows + 3, 16);
  ASSERT_EQ(plan.num_tiles(), 2);
  EXPECT_EQ(plan.tile_length, (std::vector<std::int32_t>{64, 64}));
  EXPECT_EQ(plan.tile_rows[std::size_t(kSharedTileRows) + 3], -1);
}

// Prefill runs: tiles of kSharedTileRows consecutive rows sharing what their first row
// sees; a last row alone is not tiled; the longest own pass is what is left per row.
TEST(SharedPrefixPlan, PrefillRunsTileConsecutiveRows) {
  constexpr int kTile = kSharedTileRows, kFirst = 1, kSecond = kTile + 4, kDecode = 2 * kTile + 5;
  SharedPrefixPlan plan = plan_shared_prefixes({}, kDecode + 1, 16);
  add_prefill_tiles(plan, kFirst, 100, kTile + 3);  // rows 1.. at positions 100..
  add_prefill_tiles(plan, kSecond, 0, kTile + 1);   // rows at 0..kTile: the last alone
  ASSERT_EQ(plan.num_tiles(), 3);
  EXPECT_EQ(plan.tile_length, (std::vector<std::int32_t>{101, 101 + kTile, 1}));
  EXPECT_EQ(plan.max_tile_length, 101 + kTile);
  EXPECT_EQ(plan.tile_rows[0], kFirst);
  EXPECT_EQ(plan.tile_rows[std::size_t(kTile)], kFirst + kTile);
  EXPECT_EQ(plan.tile_rows[std::size_t(kTile) + 3], -1);
  EXPECT_EQ(plan.row_start[kFirst + kTile - 1], 101);
  EXPECT_EQ(plan.row_start[kSecond + kTile], 0) << "the run's last row, alone";
  EXPECT_EQ(plan.row_start[0], 0);
  std::vector<std::int32_t> row_pos(kDecode + 1, 0);
  for (int i = 0; i < kTile + 3; ++i) row_pos[std::size_t(kFirst + i)] = 100 + i;
  for (int i = 0; i <= kTile; ++i) row_pos[std::size_t(kSecond + i)] = i;
  row_pos[kDecode] = 5;  // a decode row outside any tile: its whole context is its own
  EXPECT_EQ(max_own_positions(plan, row_pos), kTile + 1);  // the second run's last row: 0..kTile alone
}

}  // namespace
}  // namespace arbor::kernels::cuda

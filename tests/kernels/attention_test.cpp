// Paged attention against the full-softmax reference: random, non-contiguous page
// tables, GQA, first_pos not page-aligned, rows spanning several pages.
#include "kernels/cpu/attention.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "kernels/ggml_types.hpp"
#include "kernels/cpu/fp16.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "kernel_test_util.hpp"

namespace arbor::kernels::cpu {
namespace {

struct Case {
  int num_rows, first_pos, q_heads, kv_heads, head_dim, page_size;
};

void run_case(const Case& c, std::mt19937& rng, ThreadPool& pool) {
  const int total = c.first_pos + c.num_rows;
  const int num_pages = (total + c.page_size - 1) / c.page_size;
  const std::size_t page_elems = std::size_t(c.kv_heads) * c.page_size * c.head_dim;
  // Physical pool with spare pages, handed out in a shuffled order.
  const int physical = num_pages + 5;
  std::vector<int> order(physical);
  for (int i = 0; i < physical; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::uint16_t> k_pool(page_elems * physical), v_pool(page_elems * physical);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (auto& h : k_pool) h = fp32_to_fp16(dist(rng));
  for (auto& h : v_pool) h = fp32_to_fp16(dist(rng));
  std::vector<const std::uint16_t*> k_pages(num_pages), v_pages(num_pages);
  for (int p = 0; p < num_pages; ++p) {
    k_pages[p] = k_pool.data() + page_elems * order[p];
    v_pages[p] = v_pool.data() + page_elems * order[p];
    // Slots past the last written position hold garbage (NaN): must never be read.
    for (int slot = 0; slot < c.page_size; ++slot) {
      if (p * c.page_size + slot < total) continue;
      for (int h = 0; h < c.kv_heads; ++h) {
        for (int i = 0; i < c.head_dim; ++i) {
          const std::size_t off = (std::size_t(h) * c.page_size + slot) * c.head_dim + i;
          k_pool[page_elems * order[p] + off] = 0x7E00;
          v_pool[page_elems * order[p] + off] = 0x7E00;
        }
      }
    }
  }
  const auto q = testing::random_floats(rng, std::size_t(c.num_rows) * c.q_heads * c.head_dim, -2.f, 2.f);
  std::vector<float> out(q.size(), NAN), ref(q.size(), NAN);
  PagedAttentionArgs a;
  a.q = q.data();
  a.num_rows = c.num_rows;
  a.first_pos = c.first_pos;
  a.num_q_heads = c.q_heads;
  a.num_kv_heads = c.kv_heads;
  a.head_dim = c.head_dim;
  a.page_size = c.page_size;
  a.k_pages = k_pages.data();
  a.v_pages = v_pages.data();
  a.scale = 1.f / std::sqrt(float(c.head_dim));
  a.out = ref.data();
  paged_attention_reference(a);
  a.out = out.data();
  paged_attention(a, pool);
  for (std::size_t i = 0; i < out.size(); ++i) {
    ASSERT_NEAR(out[i], ref[i], 2e-5f + 2e-5f * std::fabs(ref[i]))
        << "rows " << c.num_rows << " first_pos " << c.first_pos << " index " << i;
  }
}

TEST(PagedAttention, MatchesFullSoftmaxReference) {
  std::mt19937 rng(11);
  ThreadPool pool1(1), pool2(2);
  const Case cases[] = {
      {1, 0, 9, 3, 64, 16},    // first token
      {1, 100, 9, 3, 64, 16},  // decode, mid-page
      {50, 37, 9, 3, 64, 16},  // prefill continuation, not page-aligned, several pages
      {40, 0, 9, 3, 64, 16},   // fresh prefill
      {33, 5, 4, 4, 8, 5},     // MHA, odd page size
      {7, 61, 6, 1, 12, 4},    // MQA, head_dim not a multiple of 8
      {3, 47, 9, 3, 64, 16},   // ends exactly at a page boundary
      {20, 30, 2, 1, 40, 37},  // page larger than a register of slots, head_dim % 16 != 0
      {1, 300, 9, 3, 64, 16},  // long decode: pages split across threads, then merged
      {2, 1000, 4, 1, 16, 8},  // two rows, many splits; the second row sees one more slot
      {4, 77, 2, 2, 32, 4},    // small batch, split over pages
  };
  testing::for_each_isa([&](bool) {
    for (const Case& c : cases) {
      run_case(c, rng, pool1);
      run_case(c, rng, pool2);
    }
  });
}

// Several sequences sharing the physical pages of a common prefix (same pointers), each
// with its own later pages; the batched call must match the reference per sequence.
void run_batch_case(int q_heads, int kv_heads, int head_dim, int page_size, std::mt19937& rng,
                    ThreadPool& pool) {
  const std::size_t page_elems = std::size_t(kv_heads) * page_size * head_dim;
  const int shared_pages = 2;
  struct Seq {
    int first_pos, num_rows;
    bool shares;
  };
  const Seq seqs[] = {{2 * page_size + 7, 1, true}, {2 * page_size + 30, 2, true},
                      {2 * page_size + 1, 5, true},  {page_size + 1, 2, true},
                      {3 * page_size, 1, false},     {4 * page_size + 3, 1, true}};
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  auto new_page = [&](std::vector<std::vector<std::uint16_t>>& store) {
    store.emplace_back(page_elems);
    for (auto& h : store.back()) h = fp32_to_fp16(dist(rng));
    return store.back().data();
  };
  std::vector<std::vector<std::uint16_t>> store;
  store.reserve(64);
  std::vector<const std::uint16_t*> shared_k, shared_v;
  for (int p = 0; p < shared_pages; ++p) {
    shared_k.push_back(new_page(store));
    shared_v.push_back(new_page(store));
  }
  const int n = int(std::size(seqs));
  std::vector<std::vector<const std::uint16_t*>> k_tables(n), v_tables(n);
  std::vector<std::vector<float>> qs(n), outs(n), refs(n);
  std::vector<PagedAttentionArgs> args(n);
  for (int i = 0; i < n; ++i) {
    const int total = seqs[i].first_pos + seqs[i].num_rows;
    const int pages = (total + page_size - 1) / page_size;
    for (int p = 0; p < pages; ++p) {
      if (seqs[i].shares && p < shared_pages) {
        k_tables[i].push_back(shared_k[p]);
        v_tables[i].push_back(shared_v[p]);
        continue;
      }
      auto* k = new_page(store);
      auto* v = new_page(store);
      for (int slot = 0; slot < page_size; ++slot) {  // unwritten slots: NaN
        if (p * page_size + slot < total) continue;
        for (std::size_t e = 0; e < std::size_t(kv_heads) * head_dim; ++e) {
          const std::size_t off = (e / head_dim * page_size + slot) * head_dim + e % head_dim;
          k[off] = v[off] = 0x7E00;
        }
      }
      k_tables[i].push_back(k);
      v_tables[i].push_back(v);
    }
    qs[i] = testing::random_floats(rng, std::size_t(seqs[i].num_rows) * q_heads * head_dim, -2.f, 2.f);
    outs[i].assign(qs[i].size(), NAN);
    refs[i].assign(qs[i].size(), NAN);
    args[i] = {qs[i].data(), refs[i].data(), seqs[i].num_rows, seqs[i].first_pos, q_heads, kv_heads,
               head_dim, page_size, k_tables[i].data(), v_tables[i].data(), 1.f / std::sqrt(float(head_dim))};
    paged_attention_reference(args[i]);
    args[i].out = outs[i].data();
  }
  paged_attention_batch(args.data(), n, pool);
  for (int i = 0; i < n; ++i) {
    for (std::size_t e = 0; e < outs[i].size(); ++e)
      ASSERT_NEAR(outs[i][e], refs[i][e], 2e-5f + 2e-5f * std::fabs(refs[i][e])) << "sequence " << i << " index " << e;
  }
}

TEST(PagedAttention, BatchSharesPrefixPagesAndMatchesReference) {
  std::mt19937 rng(21);
  ThreadPool pool1(1), pool2(2);
  testing::for_each_isa([&](bool) {
    for (ThreadPool* pool : {&pool1, &pool2}) {
      run_batch_case(9, 3, 64, 16, rng, *pool);  // SmolLM2 shape, direct decode path
      run_batch_case(4, 1, 40, 5, rng, *pool);   // head_dim % 16 != 0: transposed path
    }
  });
}

TEST(PagedAttention, SinglePositionReturnsItsValue) {
  // One visible position: softmax weight 1, output = V row exactly.
  ThreadPool pool(2);
  const int hd = 8;
  std::vector<std::uint16_t> k(16 * hd), v(16 * hd);
  for (int i = 0; i < hd; ++i) {
    k[i] = fp32_to_fp16(0.5f);
    v[i] = fp32_to_fp16(float(i) - 3.f);
  }
  const std::uint16_t* kp[1] = {k.data()};
  const std::uint16_t* vp[1] = {v.data()};
  std::vector<float> q(2 * hd, 1.f), out(2 * hd);
  PagedAttentionArgs a{q.data(), out.data(), 1, 0, 2, 1, hd, 16, kp, vp, 0.3f};
  testing::for_each_isa([&](bool) {
    paged_attention(a, pool);
    for (int h = 0; h < 2; ++h)
      for (int i = 0; i < hd; ++i) EXPECT_EQ(out[h * hd + i], float(i) - 3.f);
  });
}

}  // namespace
}  // namespace arbor::kernels::cpu

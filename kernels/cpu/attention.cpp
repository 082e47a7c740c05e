#include "kernels/cpu/attention.hpp"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "kernels/cpu/attention_internal.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/ops.hpp"
#include "kernels/cpu/simd_math.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "kernels/ggml_types.hpp"

namespace arbor::kernels::cpu {
namespace {

constexpr int kRowBlock = 16;  // query rows per task: each K/V page is converted once per task
constexpr int kMinPagesPerSplit = 4;

float dot(const float* a, const float* b, int n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float r = simd::hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

// acc = acc * c + sum_s p[s] * v[s]
void scale_accumulate(float* acc, float c, const float* p, const float* v, int num_slots, int n) {
  int i = 0;
  const __m256 vc = _mm256_set1_ps(c);
  for (; i + 8 <= n; i += 8) {
    __m256 a = _mm256_mul_ps(_mm256_loadu_ps(acc + i), vc);
    for (int s = 0; s < num_slots; ++s)
      a = _mm256_fmadd_ps(_mm256_set1_ps(p[s]), _mm256_loadu_ps(v + std::size_t(s) * n + i), a);
    _mm256_storeu_ps(acc + i, a);
  }
  for (; i < n; ++i) {
    float a = acc[i] * c;
    for (int s = 0; s < num_slots; ++s) a += p[s] * v[std::size_t(s) * n + i];
    acc[i] = a;
  }
}

bool args_ok(const PagedAttentionArgs& a) {
  return a.q && a.out && a.k_pages && a.v_pages && a.num_rows > 0 && a.first_pos >= 0 &&
         a.num_q_heads > 0 && a.num_kv_heads > 0 && a.num_q_heads % a.num_kv_heads == 0 &&
         a.head_dim > 0 && a.page_size > 0;
}

// Merges the page splits of one (kv head, row block): out = sum_s acc_s e^(m_s - M) /
// sum_s l_s e^(m_s - M), M = max_s m_s.
void merge_splits(const PagedAttentionArgs& a, const detail::AttentionTask& t,
                  const float* partials, std::size_t split_floats, int num_splits) {
  const int group = a.num_q_heads / a.num_kv_heads;
  const int hd = a.head_dim;
  const int nq = (t.row_end - t.row_begin) * group;
  const std::size_t ml_offset = std::size_t(nq) * hd;
  for (int qi = 0; qi < nq; ++qi) {
    float mx = -INFINITY;
    for (int s = 0; s < num_splits; ++s) mx = std::max(mx, partials[s * split_floats + ml_offset + 2 * qi]);
    float l = 0.f;
    float* o = a.out + (std::size_t(t.row_begin + qi / group) * a.num_q_heads + t.kv_head * group + qi % group) * hd;
    std::fill_n(o, hd, 0.f);
    for (int s = 0; s < num_splits; ++s) {
      const float* part = partials + s * split_floats;
      const float m = part[ml_offset + 2 * qi];
      if (m == -INFINITY) continue;  // this split saw no position of the row
      const float w = std::exp(m - mx);
      l += part[ml_offset + 2 * qi + 1] * w;
      for (int i = 0; i < hd; ++i) o[i] += part[std::size_t(qi) * hd + i] * w;
    }
    const float inv = 1.f / l;
    for (int i = 0; i < hd; ++i) o[i] *= inv;
  }
}

}  // namespace

namespace detail {

// Online softmax for rows [row_begin, row_end) x the query heads of one KV group.
void attention_task_avx2(const PagedAttentionArgs& a, const AttentionTask& t,
                         const AttentionPartial* partial) {
  const int group = a.num_q_heads / a.num_kv_heads;
  const int hd = a.head_dim, ps = a.page_size;
  const int nq = (t.row_end - t.row_begin) * group;
  thread_local std::vector<float> kf, vf, acc, state, scores;
  kf.resize(std::size_t(ps) * hd);
  vf.resize(std::size_t(ps) * hd);
  acc.assign(std::size_t(nq) * hd, 0.f);
  state.resize(std::size_t(nq) * 2);  // running max, running sum
  scores.resize(std::size_t(ps));
  for (int i = 0; i < nq; ++i) {
    state[2 * i] = -INFINITY;
    state[2 * i + 1] = 0.f;
  }
  const int last_pos = a.first_pos + t.row_end - 1;
  const int num_pages = std::min(t.page_end, last_pos / ps + 1);  // later pages are in the future
  const std::size_t head_offset = std::size_t(t.kv_head) * ps * hd;
  for (int p = t.page_begin; p < num_pages; ++p) {
    // Slots beyond the last visible position are never read (they may be unwritten).
    const int page_slots = std::min(ps, last_pos - p * ps + 1);
    fp16_to_fp32_row(a.k_pages[p] + head_offset, kf.data(), page_slots * hd);
    fp16_to_fp32_row(a.v_pages[p] + head_offset, vf.data(), page_slots * hd);
    for (int r = t.row_begin; r < t.row_end; ++r) {
      const int visible = std::min(page_slots, a.first_pos + r - p * ps + 1);  // causal mask
      if (visible <= 0) continue;
      for (int g = 0; g < group; ++g) {
        const int qh = t.kv_head * group + g;
        const float* q = a.q + (std::size_t(r) * a.num_q_heads + qh) * hd;
        const int qi = (r - t.row_begin) * group + g;
        float mx = -INFINITY;
        for (int s = 0; s < visible; ++s) {
          scores[s] = dot(q, kf.data() + std::size_t(s) * hd, hd) * a.scale;
          mx = std::max(mx, scores[s]);
        }
        const float m_old = state[2 * qi];
        const float m_new = std::max(m_old, mx);
        const float correction = std::exp(m_old - m_new);  // 0 on the first page
        float sum = 0.f;
        for (int s = 0; s < visible; ++s) sum += scores[s] = std::exp(scores[s] - m_new);
        state[2 * qi] = m_new;
        state[2 * qi + 1] = state[2 * qi + 1] * correction + sum;
        scale_accumulate(acc.data() + std::size_t(qi) * hd, correction, scores.data(), vf.data(),
                         visible, hd);
      }
    }
  }
  finish_attention_task(a, t, acc.data(), hd, state.data(), partial);
}

void finish_attention_task(const PagedAttentionArgs& a, const AttentionTask& t, const float* acc,
                           int acc_stride, const float* ml, const AttentionPartial* partial) {
  const int group = a.num_q_heads / a.num_kv_heads;
  const int hd = a.head_dim;
  const int nq = (t.row_end - t.row_begin) * group;
  if (partial != nullptr) {
    for (int qi = 0; qi < nq; ++qi) {
      std::copy_n(acc + std::size_t(qi) * acc_stride, hd, partial->acc + std::size_t(qi) * hd);
      partial->ml[2 * qi] = ml[2 * qi];
      partial->ml[2 * qi + 1] = ml[2 * qi + 1];
    }
    return;
  }
  for (int r = t.row_begin; r < t.row_end; ++r) {
    for (int g = 0; g < group; ++g) {
      const int qi = (r - t.row_begin) * group + g;
      const float inv = 1.f / ml[2 * qi + 1];
      float* o = a.out + (std::size_t(r) * a.num_q_heads + t.kv_head * group + g) * hd;
      const float* src = acc + std::size_t(qi) * acc_stride;
      for (int i = 0; i < hd; ++i) o[i] = src[i] * inv;
    }
  }
}

}  // namespace detail

void paged_attention(const PagedAttentionArgs& args, ThreadPool& pool) {
  if (!args_ok(args)) return;
  const int ps = args.page_size;
  const int num_blocks = (args.num_rows + kRowBlock - 1) / kRowBlock;
  const int total_pages = (args.first_pos + args.num_rows - 1) / ps + 1;
  // Decode-sized calls have only num_kv_heads tasks: split their pages (flash-decoding
  // style) so every thread gets work, then merge the partial softmax states.
  int splits = 1;
  const int base_tasks = num_blocks * args.num_kv_heads;
  if (pool.num_threads() > 1 && base_tasks < 2 * pool.num_threads())
    splits = std::clamp(4 * pool.num_threads() / base_tasks, 1, std::max(1, total_pages / kMinPagesPerSplit));
  const int pages_per_split = (total_pages + splits - 1) / splits;
  splits = (total_pages + pages_per_split - 1) / pages_per_split;
  // Tasks ordered most expensive first (late rows see more pages) and handed out
  // dynamically, so the causal triangle does not unbalance the threads.
  std::vector<detail::AttentionTask> tasks;
  for (int b = num_blocks - 1; b >= 0; --b) {
    for (int h = 0; h < args.num_kv_heads; ++h) {
      for (int s = 0; s < splits; ++s) {
        tasks.push_back({h, b * kRowBlock, std::min(args.num_rows, (b + 1) * kRowBlock),
                         s * pages_per_split, std::min(total_pages, (s + 1) * pages_per_split)});
      }
    }
  }
  const int group = args.num_q_heads / args.num_kv_heads;
  const std::size_t split_floats = std::size_t(kRowBlock) * group * (args.head_dim + 2);
  std::vector<float> partials(splits > 1 ? tasks.size() * split_floats : 0);
  std::atomic<std::size_t> next{0};
  const bool wide = use_avx512();
  const int workers = int(std::min<std::size_t>(pool.num_threads(), tasks.size()));
  pool.parallel_for(workers, [&](int, std::int64_t, std::int64_t) {
    for (std::size_t i = next.fetch_add(1); i < tasks.size(); i = next.fetch_add(1)) {
      const detail::AttentionTask& t = tasks[i];
      const int nq = (t.row_end - t.row_begin) * group;
      float* base = partials.data() + i * split_floats;
      const detail::AttentionPartial part{base, base + std::size_t(nq) * args.head_dim};
      const detail::AttentionPartial* pp = splits > 1 ? &part : nullptr;
      if (wide) detail::attention_task_avx512(args, t, pp);
      else detail::attention_task_avx2(args, t, pp);
    }
  });
  if (splits > 1) {
    for (std::size_t i = 0; i < tasks.size(); i += splits)
      merge_splits(args, tasks[i], partials.data() + i * split_floats, split_floats, splits);
  }
}

void paged_attention_batch(const PagedAttentionArgs* seqs, int num_seqs, ThreadPool& pool) {
  if (num_seqs <= 0) return;
  const PagedAttentionArgs& a0 = seqs[0];
  bool batchable = use_avx512();
  for (int i = 0; i < num_seqs && batchable; ++i) {
    const PagedAttentionArgs& a = seqs[i];
    batchable = args_ok(a) && a.num_rows <= kRowBlock && a.num_q_heads == a0.num_q_heads &&
                a.num_kv_heads == a0.num_kv_heads && a.head_dim == a0.head_dim &&
                a.page_size == a0.page_size && a.scale == a0.scale;
  }
  if (!batchable) {
    for (int i = 0; i < num_seqs; ++i) paged_attention(seqs[i], pool);
    return;
  }
  const int group = a0.num_q_heads / a0.num_kv_heads;
  const int hd = a0.head_dim, ps = a0.page_size;
  std::vector<detail::AttentionSource> sources(static_cast<std::size_t>(num_seqs));
  int nq = 0, total_pages = 0;
  for (int i = 0; i < num_seqs; ++i) {
    sources[i] = {&seqs[i], 0, seqs[i].num_rows, nq};
    nq += seqs[i].num_rows * group;
    total_pages = std::max(total_pages, (seqs[i].first_pos + seqs[i].num_rows - 1) / ps + 1);
  }
  // Tasks: kv head x page range, enough of them to keep every thread busy.
  const int threads = pool.num_threads();
  const int splits = threads > 1 ? std::clamp(4 * threads / a0.num_kv_heads, 1,
                                              std::max(1, total_pages / kMinPagesPerSplit))
                                 : 1;
  const int pages_per_split = (total_pages + splits - 1) / splits;
  const int num_splits = (total_pages + pages_per_split - 1) / pages_per_split;
  const int num_tasks = a0.num_kv_heads * num_splits;
  const std::size_t task_floats = std::size_t(nq) * (hd + 2);
  std::vector<float> partials(std::size_t(num_tasks) * task_floats);
  std::atomic<int> next{0};
  pool.parallel_for(std::min(threads, num_tasks), [&](int, std::int64_t, std::int64_t) {
    for (int t = next.fetch_add(1); t < num_tasks; t = next.fetch_add(1)) {
      const int h = t / num_splits, s = t % num_splits;
      float* base = partials.data() + std::size_t(t) * task_floats;
      detail::attention_sources_avx512(sources.data(), num_seqs, h, s * pages_per_split,
                                       std::min(total_pages, (s + 1) * pages_per_split), base,
                                       base + std::size_t(nq) * hd);
    }
  });
  // Merge the page splits of every query vector into its sequence's output.
  for (int h = 0; h < a0.num_kv_heads; ++h) {
    const float* task0 = partials.data() + std::size_t(h) * num_splits * task_floats;
    for (int i = 0; i < num_seqs; ++i) {
      for (int r = 0; r < seqs[i].num_rows; ++r) {
        for (int g = 0; g < group; ++g) {
          const int qi = sources[i].q_offset + r * group + g;
          float mx = -INFINITY;
          for (int s = 0; s < num_splits; ++s) mx = std::max(mx, task0[s * task_floats + std::size_t(nq) * hd + 2 * qi]);
          float* o = seqs[i].out + (std::size_t(r) * a0.num_q_heads + h * group + g) * hd;
          std::fill_n(o, hd, 0.f);
          float l = 0.f;
          for (int s = 0; s < num_splits; ++s) {
            const float* part = task0 + s * task_floats;
            const float m = part[std::size_t(nq) * hd + 2 * qi];
            if (m == -INFINITY) continue;  // this split saw no position of the row
            const float w = std::exp(m - mx);
            l += part[std::size_t(nq) * hd + 2 * qi + 1] * w;
            for (int k = 0; k < hd; ++k) o[k] += part[std::size_t(qi) * hd + k] * w;
          }
          const float inv = 1.f / l;
          for (int k = 0; k < hd; ++k) o[k] *= inv;
        }
      }
    }
  }
}

void paged_attention_reference(const PagedAttentionArgs& a) {
  if (!args_ok(a)) return;
  const int group = a.num_q_heads / a.num_kv_heads;
  const int hd = a.head_dim, ps = a.page_size;
  const int total = a.first_pos + a.num_rows;
  std::vector<float> k(std::size_t(total) * hd), v(std::size_t(total) * hd);
  std::vector<double> scores(std::size_t(a.num_rows) * total);
  for (int kh = 0; kh < a.num_kv_heads; ++kh) {
    for (int pos = 0; pos < total; ++pos) {
      const std::size_t off = (std::size_t(kh) * ps + pos % ps) * hd;
      for (int i = 0; i < hd; ++i) {
        k[std::size_t(pos) * hd + i] = fp16_to_fp32_scalar(a.k_pages[pos / ps][off + i]);
        v[std::size_t(pos) * hd + i] = fp16_to_fp32_scalar(a.v_pages[pos / ps][off + i]);
      }
    }
    for (int g = 0; g < group; ++g) {
      const int qh = kh * group + g;
      // Full score matrix with -inf above the causal diagonal, then a plain softmax.
      for (int r = 0; r < a.num_rows; ++r) {
        const float* q = a.q + (std::size_t(r) * a.num_q_heads + qh) * hd;
        double* row = scores.data() + std::size_t(r) * total;
        double mx = -INFINITY;
        for (int pos = 0; pos < total; ++pos) {
          if (pos > a.first_pos + r) {
            row[pos] = -INFINITY;
            continue;
          }
          double s = 0.0;
          for (int i = 0; i < hd; ++i) s += double(q[i]) * k[std::size_t(pos) * hd + i];
          row[pos] = s * a.scale;
          mx = std::max(mx, row[pos]);
        }
        double sum = 0.0;
        for (int pos = 0; pos < total; ++pos) sum += row[pos] = std::exp(row[pos] - mx);
        float* o = a.out + (std::size_t(r) * a.num_q_heads + qh) * hd;
        for (int i = 0; i < hd; ++i) {
          double acc = 0.0;
          for (int pos = 0; pos < total; ++pos) acc += row[pos] * v[std::size_t(pos) * hd + i];
          o[i] = float(acc / sum);
        }
      }
    }
  }
}

}  // namespace arbor::kernels::cpu

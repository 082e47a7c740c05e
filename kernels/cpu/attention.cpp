#include "kernels/cpu/attention.hpp"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "kernels/cpu/attention_internal.hpp"
#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/ggml_types.hpp"
#include "kernels/cpu/ops.hpp"
#include "kernels/cpu/simd_math.hpp"
#include "kernels/cpu/thread_pool.hpp"

namespace arbor::kernels {
namespace {

constexpr int kRowBlock = 16;  // query rows per task: each K/V page is converted once per task

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

struct Task {
  int kv_head;
  int row_begin, row_end;
};

// Online softmax for rows [row_begin, row_end) x the query heads of one KV group.
void run_task(const PagedAttentionArgs& a, const Task& t) {
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
  const int num_pages = last_pos / ps + 1;  // later pages are wholly in the future
  const std::size_t head_offset = std::size_t(t.kv_head) * ps * hd;
  for (int p = 0; p < num_pages; ++p) {
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
  for (int r = t.row_begin; r < t.row_end; ++r) {
    for (int g = 0; g < group; ++g) {
      const int qh = t.kv_head * group + g;
      const int qi = (r - t.row_begin) * group + g;
      const float inv = 1.f / state[2 * qi + 1];
      float* o = a.out + (std::size_t(r) * a.num_q_heads + qh) * hd;
      const float* src = acc.data() + std::size_t(qi) * hd;
      for (int i = 0; i < hd; ++i) o[i] = src[i] * inv;
    }
  }
}

bool args_ok(const PagedAttentionArgs& a) {
  return a.q && a.out && a.k_pages && a.v_pages && a.num_rows > 0 && a.first_pos >= 0 &&
         a.num_q_heads > 0 && a.num_kv_heads > 0 && a.num_q_heads % a.num_kv_heads == 0 &&
         a.head_dim > 0 && a.page_size > 0;
}

}  // namespace

void paged_attention(const PagedAttentionArgs& args, ThreadPool& pool) {
  if (!args_ok(args)) return;
  // Tasks ordered most expensive first (late rows see more pages) and handed out
  // dynamically, so the causal triangle does not unbalance the threads.
  std::vector<Task> tasks;
  const int num_blocks = (args.num_rows + kRowBlock - 1) / kRowBlock;
  for (int b = num_blocks - 1; b >= 0; --b) {
    for (int h = 0; h < args.num_kv_heads; ++h)
      tasks.push_back({h, b * kRowBlock, std::min(args.num_rows, (b + 1) * kRowBlock)});
  }
  std::atomic<std::size_t> next{0};
  const bool wide = use_avx512();
  const int workers = int(std::min<std::size_t>(pool.num_threads(), tasks.size()));
  pool.parallel_for(workers, [&](int, std::int64_t, std::int64_t) {
    for (std::size_t i = next.fetch_add(1); i < tasks.size(); i = next.fetch_add(1))
      if (wide) detail::attention_task_avx512(args, tasks[i].kv_head, tasks[i].row_begin, tasks[i].row_end);
      else run_task(args, tasks[i]);
  });
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

}  // namespace arbor::kernels

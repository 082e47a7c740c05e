// AVX-512 attention task: one KV head x a block of query rows (all query heads of the
// KV group). Per page, K is converted to f32 and transposed ([head_dim][slots]) so that
// 16 slot scores come out of head_dim FMAs in one register with no horizontal sums,
// the online softmax runs on 16 scores at a time, and P.V accumulates with broadcast
// probabilities. The converted page is shared by every query vector of the task.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/attention_internal.hpp"

namespace arbor::kernels::cpu::detail {
namespace {

// e^x for 16 lanes; -inf and anything below -87.3 give 0.
inline __m512 exp512(__m512 x) {
  const __mmask16 too_small = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.33f), _CMP_LT_OQ);
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.33f)), _mm512_set1_ps(88.37f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  const __m512 result = _mm512_scalef_ps(p, n);  // p * 2^n without exponent overflow games
  return _mm512_maskz_mov_ps(__mmask16(~too_small), result);
}

// dst[c][r] = src[r][c] for a 16 x 16 f32 tile (4 shuffle stages, 64 shuffles).
inline void transpose_16x16(const float* src, std::size_t src_stride, float* dst, std::size_t dst_stride) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(src + i * src_stride);
  #pragma GCC unroll 16
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // r[4i + k], 128-bit lane L, position j = src[4i + j][4L + k]
  #pragma GCC unroll 16
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  // out[4L + k] = lane L of r[k], r[4 + k], r[8 + k], r[12 + k]
  #pragma GCC unroll 16
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x88);
    t[4 + k] = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xDD);
    t[8 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x88);
    t[12 + k] = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xDD);
  }
  #pragma GCC unroll 16
  for (int k = 0; k < 4; ++k) {
    _mm512_storeu_ps(dst + k * dst_stride, _mm512_shuffle_f32x4(t[k], t[8 + k], 0x88));
    _mm512_storeu_ps(dst + (8 + k) * dst_stride, _mm512_shuffle_f32x4(t[k], t[8 + k], 0xDD));
    _mm512_storeu_ps(dst + (4 + k) * dst_stride, _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0x88));
    _mm512_storeu_ps(dst + (12 + k) * dst_stride, _mm512_shuffle_f32x4(t[4 + k], t[12 + k], 0xDD));
  }
}

constexpr int kMaxQueries = 8;  // query vectors updated together

struct ChunkArgs {
  const float* kt;  // [hd][sp] transposed K of the page (transposed mode)
  const float* kr;  // [sp][hp] K of the page, row-major (direct mode)
  const float* vf;  // [sp][hp] V of the page
  int sp, hd, hp;
  __m512 scale;
  const float* q[kMaxQueries];
  float* o[kMaxQueries];   // running weighted sums [hp]
  float* ml[kMaxQueries];  // running max (the sum lives in `l`)
  float* l[kMaxQueries];   // running sum, as 16 lane partial sums (reduced once at the end)
  int visible[kMaxQueries];  // slots of the page query i may see (> 0; a prefix)
};

// lane s = horizontal sum of v[s], for 16 vectors (46 shuffles/adds instead of 16
// full reductions).
inline __m512 reduce_16(const __m512 v[16]) {
  __m512 w[8], x[4];
  #pragma GCC unroll 16
  for (int k = 0; k < 8; ++k)  // 256-bit half h of w[k]: 8 partials of v[2k + h]
    w[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x44),
                         _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xEE));
  #pragma GCC unroll 16
  for (int k = 0; k < 4; ++k)  // 128-bit lane L of x[k]: 4 partials of v[4k + L]
    x[k] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * k], w[2 * k + 1], 0x88),
                         _mm512_shuffle_f32x4(w[2 * k], w[2 * k + 1], 0xDD));
  const __m512 y0 = _mm512_add_ps(_mm512_unpacklo_ps(x[0], x[1]), _mm512_unpackhi_ps(x[0], x[1]));
  const __m512 y1 = _mm512_add_ps(_mm512_unpacklo_ps(x[2], x[3]), _mm512_unpackhi_ps(x[2], x[3]));
  // position 4L + k now holds the sum of v[4k + L]
  const __m512 z = _mm512_add_ps(_mm512_shuffle_ps(y0, y1, 0x44), _mm512_shuffle_ps(y0, y1, 0xEE));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, z);
}

// Scores of one query against 16 row-major K rows (rows past the page end are finite
// filler, masked later). hd must be a multiple of 16.
inline __m512 direct_scores(const float* q, const float* kr, int hp, int hd) {
  __m512 v[16];
  #pragma GCC unroll 16
  for (int s = 0; s < 16; ++s) {
    __m512 t = _mm512_mul_ps(_mm512_loadu_ps(q), _mm512_loadu_ps(kr + std::size_t(s) * hp));
    for (int j = 16; j < hd; j += 16)
      t = _mm512_fmadd_ps(_mm512_loadu_ps(q + j), _mm512_loadu_ps(kr + std::size_t(s) * hp + j), t);
    v[s] = t;
  }
  return reduce_16(v);
}

// o[i][j0 .. j0 + 16 kJ) = o * corr[i] + sum_s prob[i][s] * V[c0 + s][j0 ..].
template <int NQ, int kJ>
inline void pv_pass(const ChunkArgs& c, const float (*prob)[16], const float* corr, int c0, int j0,
                    int n_max) {
  __m512 u[NQ][kJ];
  #pragma GCC unroll 16
  for (int i = 0; i < NQ; ++i) {
    #pragma GCC unroll 16
    for (int k = 0; k < kJ; ++k) u[i][k] = _mm512_mul_ps(_mm512_loadu_ps(c.o[i] + j0 + 16 * k), _mm512_set1_ps(corr[i]));
  }
  const float* v = c.vf + std::size_t(c0) * c.hp + j0;
  for (int s = 0; s < n_max; ++s) {
    __m512 vv[kJ];
    #pragma GCC unroll 16
    for (int k = 0; k < kJ; ++k) vv[k] = _mm512_loadu_ps(v + std::size_t(s) * c.hp + 16 * k);
    #pragma GCC unroll 16
    for (int i = 0; i < NQ; ++i) {
      const __m512 p = _mm512_set1_ps(prob[i][s]);
      #pragma GCC unroll 16
      for (int k = 0; k < kJ; ++k) u[i][k] = _mm512_fmadd_ps(p, vv[k], u[i][k]);
    }
  }
  #pragma GCC unroll 16
  for (int i = 0; i < NQ; ++i) {
    #pragma GCC unroll 16
    for (int k = 0; k < kJ; ++k) _mm512_storeu_ps(c.o[i] + j0 + 16 * k, u[i][k]);
  }
}

// Online-softmax update of NQ query vectors with their visible slots of a page, 16
// slots at a time. Each K/V register load feeds NQ (x chains) independent FMA chains.
template <int NQ, bool kDirect>
void page_chunks(const ChunkArgs& c) {
  constexpr int kChains = NQ <= 3 ? 4 : 2;  // enough chains in flight to hide FMA latency
  alignas(64) float prob[NQ][16];
  int max_visible = 0;
  #pragma GCC unroll 16
  for (int i = 0; i < NQ; ++i) max_visible = std::max(max_visible, c.visible[i]);
  for (int c0 = 0; c0 < max_visible; c0 += 16) {
    __m512 sc[NQ][kChains];
    #pragma GCC unroll 16
    for (int i = 0; i < NQ; ++i)
      #pragma GCC unroll 16
      for (int k = 0; k < kChains; ++k) sc[i][k] = _mm512_setzero_ps();
    const float* kp = c.kt + c0;
    int d = kDirect ? c.hd : 0;  // direct mode: scores below, no transposed loop
    if constexpr (kDirect) {
      #pragma GCC unroll 16
      for (int i = 0; i < NQ; ++i) sc[i][0] = direct_scores(c.q[i], c.kr + std::size_t(c0) * c.hp, c.hp, c.hd);
    }
    for (; d + kChains <= c.hd; d += kChains) {
      #pragma GCC unroll 16
      for (int k = 0; k < kChains; ++k) {
        const __m512 kv = _mm512_loadu_ps(kp + std::size_t(d + k) * c.sp);
        #pragma GCC unroll 16
        for (int i = 0; i < NQ; ++i) sc[i][k] = _mm512_fmadd_ps(_mm512_set1_ps(c.q[i][d + k]), kv, sc[i][k]);
      }
    }
    for (; d < c.hd; ++d) {
      const __m512 kv = _mm512_loadu_ps(kp + std::size_t(d) * c.sp);
      #pragma GCC unroll 16
      for (int i = 0; i < NQ; ++i) sc[i][0] = _mm512_fmadd_ps(_mm512_set1_ps(c.q[i][d]), kv, sc[i][0]);
    }
    float corr[NQ];
    int n_max = 0;
    #pragma GCC unroll 16
    for (int i = 0; i < NQ; ++i) {
      const int n = std::min(16, c.visible[i] - c0);
      if (n <= 0) {  // past this query's causal limit: state unchanged
        corr[i] = 1.f;
        _mm512_store_ps(prob[i], _mm512_setzero_ps());
        continue;
      }
      n_max = std::max(n_max, n);
      __m512 sum = sc[i][0];
      #pragma GCC unroll 16
      for (int k = 1; k < kChains; ++k) sum = _mm512_add_ps(sum, sc[i][k]);
      const __mmask16 valid = n == 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
      const __m512 x = _mm512_mask_blend_ps(valid, _mm512_set1_ps(-INFINITY), _mm512_mul_ps(sum, c.scale));
      const float m_old = c.ml[i][0];
      const float m_new = std::max(m_old, _mm512_reduce_max_ps(x));
      // 0 on the first chunk; 1 (no call) once the running max has settled.
      corr[i] = m_new == m_old ? 1.f : std::exp(m_old - m_new);
      const __m512 pr = exp512(_mm512_sub_ps(x, _mm512_set1_ps(m_new)));
      c.ml[i][0] = m_new;
      _mm512_storeu_ps(c.l[i], _mm512_fmadd_ps(_mm512_loadu_ps(c.l[i]), _mm512_set1_ps(corr[i]), pr));
      _mm512_store_ps(prob[i], pr);
    }
    // P.V: kJ 16-dim blocks per pass, so each broadcast probability feeds kJ FMAs.
    constexpr int kJ = NQ <= 4 ? 4 : 2;
    int j = 0;
    for (; j + 16 * kJ <= c.hp; j += 16 * kJ) pv_pass<NQ, kJ>(c, prob, corr, c0, j, n_max);
    for (; j < c.hp; j += 16) pv_pass<NQ, 1>(c, prob, corr, c0, j, n_max);
  }
}

using PageChunksFn = void (*)(const ChunkArgs&);
template <bool kDirect>
constexpr PageChunksFn kPageChunks[kMaxQueries + 1] = {
    nullptr,                      page_chunks<1, kDirect>, page_chunks<2, kDirect>,
    page_chunks<3, kDirect>,      page_chunks<4, kDirect>, page_chunks<5, kDirect>,
    page_chunks<6, kDirect>,      page_chunks<7, kDirect>, page_chunks<8, kDirect>};

}  // namespace

namespace {

// Online softmax of several query sources (sequences) for one KV head over logical
// pages [page_begin, page_end). Sources whose page tables hold the same physical page
// at a logical index (a shared prefix) have that page converted once and all their
// query vectors run against it together. State per query vector qi (source q_offset +
// (row - row_begin) * group + g): acc [hp], ml [2] (max, -), lsum [16].
void run_pages(const AttentionSource* sources, int num_sources, int kv_head, int page_begin,
               int page_end, float* acc, float* ml, float* lsum) {
  const PagedAttentionArgs& a0 = *sources[0].args;
  const int group = a0.num_q_heads / a0.num_kv_heads;
  const int hd = a0.head_dim, ps = a0.page_size;
  const int sp = (ps + 15) / 16 * 16;  // slots padded to whole registers
  const int hp = (hd + 15) / 16 * 16;
  thread_local std::vector<float> kt, vf, kbuf;
  thread_local std::vector<int> members;
  thread_local std::vector<char> done;
  // Grown zero-filled and then only ever overwritten with converted K/V, so slots past
  // a page's last visible one always hold finite filler (no per-task memset).
  if (kt.size() != std::size_t(hp) * sp) kt.assign(std::size_t(hp) * sp, 0.f);
  if (vf.size() != std::size_t(sp) * hp) vf.assign(std::size_t(sp) * hp, 0.f);
  if (kbuf.size() != std::size_t(sp) * hp) kbuf.assign(std::size_t(sp) * hp, 0.f);
  const std::size_t head_offset = std::size_t(kv_head) * ps * hd;
  const __m512 vscale = _mm512_set1_ps(a0.scale);
  auto last_pos = [&](int i) { return sources[i].args->first_pos + sources[i].row_end - 1; };
  done.assign(std::size_t(num_sources), 0);
  for (int p = page_begin; p < page_end; ++p) {
    std::fill(done.begin(), done.end(), 0);
    for (int lead = 0; lead < num_sources; ++lead) {
      if (done[lead] || last_pos(lead) / ps < p) continue;  // page wholly in its future
      // Sources sharing this physical page.
      const std::uint16_t* kpage = sources[lead].args->k_pages[p];
      const std::uint16_t* vpage = sources[lead].args->v_pages[p];
      members.clear();
      int page_slots = 0, nq = 0;
      for (int i = lead; i < num_sources; ++i) {
        if (done[i] || last_pos(i) / ps < p) continue;
        if (sources[i].args->k_pages[p] != kpage || sources[i].args->v_pages[p] != vpage) continue;
        done[i] = 1;
        members.push_back(i);
        // Only slots up to the last visible position are read (later ones may be unwritten).
        page_slots = std::max(page_slots, std::min(ps, last_pos(i) - p * ps + 1));
        nq += (sources[i].row_end - sources[i].row_begin) * group;
      }
      const std::uint16_t* ksrc = kpage + head_offset;
      const std::uint16_t* vsrc = vpage + head_offset;
      if (hd == hp) {  // rows are contiguous in both the page and the buffers
        const int total = page_slots * hd;
        for (int i = 0; i < total; i += 16) {
          _mm512_storeu_ps(kbuf.data() + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(ksrc + i))));
          _mm512_storeu_ps(vf.data() + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(vsrc + i))));
        }
      } else {
        const __mmask16 tail = __mmask16((1u << (hd % 16)) - 1);
        for (int s = 0; s < page_slots; ++s) {
          float* vrow = vf.data() + std::size_t(s) * hp;
          float* krow = kbuf.data() + std::size_t(s) * hp;
          for (int d = 0; d < hd; d += 16) {
            const __mmask16 m = hd - d >= 16 ? __mmask16(0xFFFF) : tail;
            _mm512_mask_storeu_ps(vrow + d, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, vsrc + std::size_t(s) * hd + d)));
            _mm512_mask_storeu_ps(krow + d, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, ksrc + std::size_t(s) * hd + d)));
          }
        }
      }
      // Few query vectors (decode): dot K rows directly and reduce 16 at a time, instead
      // of transposing the page for only a handful of queries.
      const bool direct = hd % 16 == 0 && nq <= kMaxQueries;
      if (!direct) {
        for (int s0 = 0; s0 < page_slots; s0 += 16)
          for (int d0 = 0; d0 < hp; d0 += 16)
            transpose_16x16(kbuf.data() + std::size_t(s0) * hp + d0, hp, kt.data() + std::size_t(d0) * sp + s0, sp);
      }
      // Query vectors (source, row, head) that see this page, kMaxQueries at a time.
      ChunkArgs c{kt.data(), kbuf.data(), vf.data(), sp, hd, hp, vscale, {}, {}, {}, {}, {}};
      const PageChunksFn* chunks = direct ? kPageChunks<true> : kPageChunks<false>;
      int n = 0;
      for (int m : members) {
        const AttentionSource& src = sources[m];
        const PagedAttentionArgs& a = *src.args;
        const int own_slots = std::min(ps, last_pos(m) - p * ps + 1);
        for (int r = src.row_begin; r < src.row_end; ++r) {
          const int visible = std::min(own_slots, a.first_pos + r - p * ps + 1);  // causal mask
          if (visible <= 0) continue;
          for (int g = 0; g < group; ++g) {
            const int qi = src.q_offset + (r - src.row_begin) * group + g;
            c.q[n] = a.q + (std::size_t(r) * a.num_q_heads + kv_head * group + g) * hd;
            c.o[n] = acc + std::size_t(qi) * hp;
            c.ml[n] = ml + 2 * qi;
            c.l[n] = lsum + std::size_t(qi) * 16;
            c.visible[n] = visible;
            if (++n == kMaxQueries) {
              chunks[n](c);
              n = 0;
            }
          }
        }
      }
      if (n > 0) chunks[n](c);
    }
  }
}

struct TaskState {
  std::vector<float> acc, ml, lsum;
  void reset(int nq, int hp) {
    acc.assign(std::size_t(nq) * hp, 0.f);
    lsum.assign(std::size_t(nq) * 16, 0.f);
    ml.resize(std::size_t(nq) * 2);
    for (int i = 0; i < nq; ++i) {
      ml[2 * i] = -INFINITY;
      ml[2 * i + 1] = 0.f;
    }
  }
  void reduce_sums(int nq) {
    for (int i = 0; i < nq; ++i) ml[2 * i + 1] = _mm512_reduce_add_ps(_mm512_loadu_ps(lsum.data() + std::size_t(i) * 16));
  }
};

}  // namespace

void attention_task_avx512(const PagedAttentionArgs& a, const AttentionTask& task,
                           const AttentionPartial* partial) {
  const int group = a.num_q_heads / a.num_kv_heads;
  const int nq = (task.row_end - task.row_begin) * group;
  const int hp = (a.head_dim + 15) / 16 * 16;
  thread_local TaskState st;
  st.reset(nq, hp);
  const AttentionSource src{&a, task.row_begin, task.row_end, 0};
  run_pages(&src, 1, task.kv_head, task.page_begin, task.page_end, st.acc.data(), st.ml.data(), st.lsum.data());
  st.reduce_sums(nq);
  finish_attention_task(a, task, st.acc.data(), hp, st.ml.data(), partial);
}

void attention_sources_avx512(const AttentionSource* sources, int num_sources, int kv_head,
                              int page_begin, int page_end, float* partial_acc, float* partial_ml) {
  const PagedAttentionArgs& a0 = *sources[0].args;
  const int group = a0.num_q_heads / a0.num_kv_heads;
  const int hd = a0.head_dim, hp = (hd + 15) / 16 * 16;
  int nq = 0;
  for (int i = 0; i < num_sources; ++i) nq += (sources[i].row_end - sources[i].row_begin) * group;
  thread_local TaskState st;
  st.reset(nq, hp);
  run_pages(sources, num_sources, kv_head, page_begin, page_end, st.acc.data(), st.ml.data(), st.lsum.data());
  st.reduce_sums(nq);
  for (int qi = 0; qi < nq; ++qi) {
    std::copy_n(st.acc.data() + std::size_t(qi) * hp, hd, partial_acc + std::size_t(qi) * hd);
    partial_ml[2 * qi] = st.ml[2 * qi];
    partial_ml[2 * qi + 1] = st.ml[2 * qi + 1];
  }
}

}  // namespace arbor::kernels::cpu::detail

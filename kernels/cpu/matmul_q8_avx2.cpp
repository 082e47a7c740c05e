// AVX2 int8 kernels (vpmaddubsw): activation quantization, and the fallback matmul
// for Q4_0/Q4_1/Q8_0 on machines without AVX-512 VNNI.
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/matmul_internal.hpp"

namespace arbor::kernels::detail {
namespace {

float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Signed dot of a u8 vector with an s8 vector, as 8 int32 partial sums. Callers keep
// pairs u*x within int16 (|u| <= 128 or u <= 15).
inline __m256i dot_u8s8(__m256i u, __m256i x) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1));
}

template <GgmlType T>
struct BlockOf;
template <> struct BlockOf<GgmlType::Q4_0> { using type = BlockQ4_0; };
template <> struct BlockOf<GgmlType::Q4_1> { using type = BlockQ4_1; };
template <> struct BlockOf<GgmlType::Q8_0> { using type = BlockQ8_0; };

// One weight row against up to kC activation rows.
template <GgmlType T, int kC>
void row_kernel(const typename BlockOf<T>::type* wb, const QuantizedActivations& xa,
                std::int64_t c0, int nc, float* out /* [nc] */) {
  __m256 acc[kC];
  float off_sum[kC];
  for (int c = 0; c < kC; ++c) {
    acc[c] = _mm256_setzero_ps();
    off_sum[c] = 0.f;
  }
  const std::int64_t nb = xa.num_blocks;
  const __m256i low = _mm256_set1_epi8(0x0F);
  for (std::int64_t b = 0; b < nb; ++b) {
    const float d = _cvtsh_ss(wb[b].d);
    __m256i u;
    float off = 0.f;
    if constexpr (T == GgmlType::Q8_0) {
      u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qs));
    } else {
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[b].qs));
      u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), low);
      if constexpr (T == GgmlType::Q4_1) off = _cvtsh_ss(wb[b].m);
      else off = -8.f * d;
    }
    for (int c = 0; c < nc; ++c) {
      const std::int64_t row = c0 + c;
      const __m256i x = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(xa.qs + (row * nb + b) * 32));
      __m256i dot;
      if constexpr (T == GgmlType::Q8_0) {
        // |w| <= 128 and sign moved onto x keeps vpmaddubsw from saturating.
        dot = dot_u8s8(_mm256_sign_epi8(u, u), _mm256_sign_epi8(x, u));
      } else {
        dot = dot_u8s8(u, x);
        off_sum[c] += off * xa.s[row * nb + b];
      }
      acc[c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(d * xa.d[row * nb + b]),
                               acc[c]);
    }
  }
  for (int c = 0; c < nc; ++c) out[c] = hsum(acc[c]) + off_sum[c];
}

template <GgmlType T>
void matmul_rows(const WeightMatrix& w, const QuantizedActivations& xa, std::int64_t r0,
                 std::int64_t r1, float* y) {
  using Block = typename BlockOf<T>::type;
  constexpr int kC = 4;
  constexpr std::int64_t kPrefetchRows = 8;
  float out[kC];
  for (std::int64_t c0 = 0; c0 < xa.m; c0 += kC) {
    const int nc = int(std::min<std::int64_t>(kC, xa.m - c0));
    for (std::int64_t r = r0; r < r1; ++r) {
      const auto* wb = static_cast<const Block*>(w.data) + r * xa.num_blocks;
      // Stream a few rows ahead: the hardware prefetchers alone leave GEMV latency bound.
      if (r + kPrefetchRows < w.rows) {
        const auto* ahead = reinterpret_cast<const char*>(wb + kPrefetchRows * xa.num_blocks);
        for (std::int64_t off = 0; off < std::int64_t(sizeof(Block)) * xa.num_blocks; off += 64)
          _mm_prefetch(ahead + off, _MM_HINT_T0);
      }
      row_kernel<T, kC>(wb, xa, c0, nc, out);
      for (int c = 0; c < nc; ++c) y[(c0 + c) * w.rows + r] = out[c];
    }
  }
}

}  // namespace

void quantize_activations_avx2(const float* x, std::int64_t cols, std::int64_t row_begin,
                               std::int64_t row_end, std::int8_t* qs, float* d, float* s) {
  const std::int64_t nb = cols / 32;
  const __m256 sign_mask = _mm256_set1_ps(-0.f);
  for (std::int64_t r = row_begin; r < row_end; ++r) {
    for (std::int64_t b = 0; b < nb; ++b) {
      const float* src = x + r * cols + b * 32;
      __m256 v[4];
      __m256 amax = _mm256_setzero_ps();
      for (int k = 0; k < 4; ++k) {
        v[k] = _mm256_loadu_ps(src + 8 * k);
        amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign_mask, v[k]));
      }
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
      const float max_abs = _mm_cvtss_f32(m4);
      const float scale = max_abs / 127.f;
      const __m256 inv = _mm256_set1_ps(max_abs > 0.f ? 127.f / max_abs : 0.f);
      __m256i q[4];
      for (int k = 0; k < 4; ++k) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], inv));
      // Sum of the 32 quants, then pack to bytes in order (packs interleave lanes).
      __m256i sum = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
      s4 = _mm_hadd_epi32(s4, s4);
      s4 = _mm_hadd_epi32(s4, s4);
      const __m256i p01 = _mm256_packs_epi32(q[0], q[1]);
      const __m256i p23 = _mm256_packs_epi32(q[2], q[3]);
      __m256i bytes = _mm256_packs_epi16(p01, p23);
      bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + (r * nb + b) * 32), bytes);
      d[r * nb + b] = scale;
      s[r * nb + b] = scale * float(_mm_cvtsi128_si32(s4));
    }
  }
}

void matmul_q8_avx2(const WeightMatrix& w, const QuantizedActivations& xa, std::int64_t row_begin,
                    std::int64_t row_end, float* y) {
  switch (w.type) {
    case GgmlType::Q4_0: matmul_rows<GgmlType::Q4_0>(w, xa, row_begin, row_end, y); return;
    case GgmlType::Q4_1: matmul_rows<GgmlType::Q4_1>(w, xa, row_begin, row_end, y); return;
    case GgmlType::Q8_0: matmul_rows<GgmlType::Q8_0>(w, xa, row_begin, row_end, y); return;
    default: return;
  }
}

}  // namespace arbor::kernels::detail

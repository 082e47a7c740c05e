// AVX2 int8 kernels (vpmaddubsw): activation quantization, and the fallback matmul
// for Q4_0/Q4_1/Q8_0 on machines without AVX-512 VNNI.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/matmul_internal.hpp"

namespace arbor::kernels::cpu::detail {
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
  #pragma GCC unroll 16
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
  // Rows in small groups that stay in L1 while every activation chunk passes over
  // them, so each weight byte comes from memory once whatever m is.
  constexpr std::int64_t kRowGroup = 16;
  float out[kC];
  for (std::int64_t g0 = r0; g0 < r1; g0 += kRowGroup) {
    const std::int64_t g1 = std::min(r1, g0 + kRowGroup);
    for (std::int64_t c0 = 0; c0 < xa.m; c0 += kC) {
      const int nc = int(std::min<std::int64_t>(kC, xa.m - c0));
      for (std::int64_t r = g0; r < g1; ++r) {
        const auto* wb = static_cast<const Block*>(w.data) + r * xa.num_blocks;
        // Stream a few rows ahead: the hardware prefetchers alone leave GEMV latency bound.
        if (c0 == 0 && r + kPrefetchRows < w.rows) {
          const auto* ahead = reinterpret_cast<const char*>(wb + kPrefetchRows * xa.num_blocks);
          for (std::int64_t off = 0; off < std::int64_t(sizeof(Block)) * xa.num_blocks; off += 64)
            _mm_prefetch(ahead + off, _MM_HINT_T0);
        }
        row_kernel<T, kC>(wb, xa, c0, nc, out);
        for (int c = 0; c < nc; ++c) y[(c0 + c) * w.rows + r] = out[c];
      }
    }
  }
}

// Q4_0 / Q4_1: 8-row interleaved tiles (as in the VNNI kernel, with vpmaddubsw). For a
// block, ymm register g holds in 32-bit lane j the unsigned nibbles 4g..4g+3 of row j,
// so one vpmaddubsw with 4 activation bytes broadcast advances 8 row dots at once.
// Nibble products are small (2 * 15 * 127 per pair), so the 8 registers' int16 sums are
// added before a single vpmaddwd (8 * 3810 < 32767).
constexpr int kRows8 = 8;

struct alignas(32) PackedBlock8 {
  __m256i u[8];
  __m256 d, off;
};

template <GgmlType T>
void pack_block8(const std::uint8_t* const* rows, __m256i row_offsets, const std::uint8_t* base,
                 std::int64_t b, PackedBlock8& out) {
  constexpr int kBytes = T == GgmlType::Q4_1 ? 20 : 18;
  constexpr int kQs = T == GgmlType::Q4_1 ? 4 : 2;
  auto load2 = [&](int lo, int hi) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[lo] + b * kBytes + kQs));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[hi] + b * kBytes + kQs));
    return _mm256_set_m128i(c, a);
  };
  // Lane L of register i holds row i + 4L: the in-lane 4x4 dword transpose below then
  // leaves row 4L + i at dword 4L + i.
  const __m256i a = load2(0, 4), bb = load2(1, 5), c = load2(2, 6), d = load2(3, 7);
  const __m256i t0 = _mm256_unpacklo_epi32(a, bb), t1 = _mm256_unpackhi_epi32(a, bb);
  const __m256i t2 = _mm256_unpacklo_epi32(c, d), t3 = _mm256_unpackhi_epi32(c, d);
  const __m256i z[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                        _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
  const __m256i low = _mm256_set1_epi8(0x0F);
  #pragma GCC unroll 16
  for (int g = 0; g < 4; ++g) {
    out.u[g] = _mm256_and_si256(z[g], low);
    out.u[4 + g] = _mm256_and_si256(_mm256_srli_epi32(z[g], 4), low);
  }
  // Headers (d | m << 16) of the 8 rows -> two rows of 8 halves -> f32.
  const __m256i h = _mm256_i32gather_epi32(reinterpret_cast<const int*>(base + b * kBytes), row_offsets, 1);
  const __m256i mask16 = _mm256_set1_epi32(0xFFFF);
  const __m256i packed = _mm256_permute4x64_epi64(
      _mm256_packus_epi32(_mm256_and_si256(h, mask16), _mm256_srli_epi32(h, 16)), 0xD8);
  out.d = _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
  if constexpr (T == GgmlType::Q4_1) out.off = _mm256_cvtph_ps(_mm256_extracti128_si256(packed, 1));
  else out.off = _mm256_mul_ps(out.d, _mm256_set1_ps(-8.f));
}

template <int kC>
void tile8_dot(const PackedBlock8* packed, std::int64_t nb, const QuantizedActivations& xa,
               std::int64_t c0, __m256 acc[kC]) {
  const __m256i ones = _mm256_set1_epi16(1);
  #pragma GCC unroll 16
  for (int c = 0; c < kC; ++c) acc[c] = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const PackedBlock8& p = packed[b];
    #pragma GCC unroll 16
    for (int c = 0; c < kC; ++c) {
      const std::int8_t* xq = xa.qs + ((c0 + c) * nb + b) * 32;
      int v;
      __builtin_memcpy(&v, xq, 4);
      __m256i s16 = _mm256_maddubs_epi16(p.u[0], _mm256_set1_epi32(v));
      #pragma GCC unroll 16
      for (int g = 1; g < 8; ++g) {
        __builtin_memcpy(&v, xq + 4 * g, 4);
        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(p.u[g], _mm256_set1_epi32(v)));
      }
      const std::int64_t k = (c0 + c) * nb + b;
      const __m256 dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(s16, ones));
      acc[c] = _mm256_fmadd_ps(dot, _mm256_mul_ps(p.d, _mm256_set1_ps(xa.d[k])), acc[c]);
      acc[c] = _mm256_fmadd_ps(p.off, _mm256_set1_ps(xa.s[k]), acc[c]);
    }
  }
}

template <int kC>
void tile8_rows(const PackedBlock8* packed, std::int64_t nb, const QuantizedActivations& xa,
                std::int64_t c0, float* y, std::int64_t y_stride, std::int64_t row0, int live) {
  __m256 acc[kC];
  tile8_dot<kC>(packed, nb, xa, c0, acc);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(live), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  #pragma GCC unroll 16
  for (int c = 0; c < kC; ++c) _mm256_maskstore_ps(y + (c0 + c) * y_stride + row0, mask, acc[c]);
}

template <GgmlType T>
void matmul_tiles8(const WeightMatrix& w, const QuantizedActivations& xa, std::int64_t r0,
                   std::int64_t r1, float* y) {
  constexpr int kBytes = T == GgmlType::Q4_1 ? 20 : 18;
  const std::int64_t nb = xa.num_blocks;
  const std::int64_t rb = nb * kBytes;
  thread_local std::vector<PackedBlock8> packed;
  if (std::int64_t(packed.size()) < nb) packed.resize(std::size_t(nb));
  const auto* data = static_cast<const std::uint8_t*>(w.data);
  const std::uint8_t* end = data + w.rows * rb;
  for (std::int64_t row0 = r0; row0 < r1; row0 += kRows8) {
    const int live = int(std::min<std::int64_t>(kRows8, r1 - row0));
    const std::uint8_t* rows[kRows8];
    alignas(32) int offsets[kRows8];
    for (int j = 0; j < kRows8; ++j) {
      const int jj = std::min(j, live - 1);
      rows[j] = data + (row0 + jj) * rb;
      offsets[j] = int(jj * rb);
    }
    const __m256i row_offsets = _mm256_load_si256(reinterpret_cast<const __m256i*>(offsets));
    const std::uint8_t* base = data + row0 * rb;
    // Stream 4 tiles ahead (a tile's 8 rows are contiguous).
    const std::uint8_t* ahead = base + 4 * kRows8 * rb;
    for (std::int64_t off = 0; off < kRows8 * rb; off += 64)
      if (ahead + off < end) _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T0);
    for (std::int64_t b = 0; b < nb; ++b) pack_block8<T>(rows, row_offsets, base, b, packed[b]);
    std::int64_t c0 = 0;
    for (; c0 + 4 <= xa.m; c0 += 4) tile8_rows<4>(packed.data(), nb, xa, c0, y, w.rows, row0, live);
    switch (xa.m - c0) {
      case 3: tile8_rows<3>(packed.data(), nb, xa, c0, y, w.rows, row0, live); break;
      case 2: tile8_rows<2>(packed.data(), nb, xa, c0, y, w.rows, row0, live); break;
      case 1: tile8_rows<1>(packed.data(), nb, xa, c0, y, w.rows, row0, live); break;
      default: break;
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
      #pragma GCC unroll 16
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
      #pragma GCC unroll 16
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
    case GgmlType::Q4_0: matmul_tiles8<GgmlType::Q4_0>(w, xa, row_begin, row_end, y); return;
    case GgmlType::Q4_1: matmul_tiles8<GgmlType::Q4_1>(w, xa, row_begin, row_end, y); return;
    case GgmlType::Q8_0: matmul_rows<GgmlType::Q8_0>(w, xa, row_begin, row_end, y); return;
    default: return;
  }
}

}  // namespace arbor::kernels::cpu::detail

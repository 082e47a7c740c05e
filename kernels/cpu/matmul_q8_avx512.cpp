// AVX-512 VNNI int8 matmul for Q4_0/Q4_1/Q8_0 weights.
//
// Weights are repacked, 16 rows at a time, into "interleaved" tiles: for each quant
// block, 8 zmm registers where register g holds, in 32-bit lane j, the four unsigned
// bytes u[4g..4g+3] of row j. One vpdpbusd of such a register with 4 activation bytes
// broadcast to every lane advances 16 row dot products at once, so a block costs 8
// vpdpbusd + 3 float ops for 16 rows, and per-block scales are applied as 16-lane
// vectors (no horizontal sums). A tile's repacked blocks sit in a small per-thread
// buffer and are reused across all activation rows (prefill), while for decode the
// weight bytes are streamed once.
// GCC 12 flags its own AVX-512 intrinsic headers (casts leave "__Y" undefined on purpose).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "kernels/cpu/matmul_internal.hpp"

namespace arbor::kernels::cpu::detail {
namespace {

constexpr int kTileRows = 16;
constexpr int kPrefetchTiles = 4;

struct alignas(64) PackedBlock {
  __m512i u[8];  // register g: lane j = bytes 4g..4g+3 of row j, unsigned
  __m512 d;      // per-row scale
  __m512 off;    // per-row offset (value = d * u + off)
};

// Transposes 16 rows x 4 dwords (16 bytes at src[j] for row j) into 4 zmm, register k
// lane j = dword k of row j.
inline void transpose_16x4(const std::uint8_t* const* src, __m512i out[4]) {
  auto load4 = [&](int a, int b, int c, int d) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src[a])));
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[b])), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[c])), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(src[d])), 3);
  };
  // Lane L of register i holds row 4L + i, so the in-lane 4x4 transpose below leaves
  // row 4L + i at dword position 4L + i: natural order.
  const __m512i a = load4(0, 4, 8, 12), b = load4(1, 5, 9, 13);
  const __m512i c = load4(2, 6, 10, 14), d = load4(3, 7, 11, 15);
  const __m512i t0 = _mm512_unpacklo_epi32(a, b), t1 = _mm512_unpackhi_epi32(a, b);
  const __m512i t2 = _mm512_unpacklo_epi32(c, d), t3 = _mm512_unpackhi_epi32(c, d);
  out[0] = _mm512_unpacklo_epi64(t0, t2);
  out[1] = _mm512_unpackhi_epi64(t0, t2);
  out[2] = _mm512_unpacklo_epi64(t1, t3);
  out[3] = _mm512_unpackhi_epi64(t1, t3);
}

template <GgmlType T>
constexpr int kBlockBytes = T == GgmlType::Q4_0 ? 18 : T == GgmlType::Q4_1 ? 20 : 34;

// Repacks block b of the 16 rows whose starts are `rows[j]` (rows past the end repeat
// the last real row; their results are discarded).
template <GgmlType T>
inline void pack_block(const std::uint8_t* const* rows, __m512i row_offsets,
                       const std::uint8_t* base, std::int64_t b, PackedBlock& out) {
  constexpr int kBytes = kBlockBytes<T>;
  const std::uint8_t* src[kTileRows];
  const __m512i low = _mm512_set1_epi8(0x0F);
  const __m512i header = _mm512_i32gather_epi32(row_offsets, base + b * kBytes, 1);
  const __m512 d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(header));
  out.d = d;
  if constexpr (T == GgmlType::Q8_0) {
    for (int j = 0; j < kTileRows; ++j) src[j] = rows[j] + b * kBytes + 2;
    __m512i t[4];
    transpose_16x4(src, t);
    const __m512i flip = _mm512_set1_epi8(char(0x80));
    #pragma GCC unroll 16
    for (int g = 0; g < 4; ++g) out.u[g] = _mm512_xor_si512(t[g], flip);
    for (int j = 0; j < kTileRows; ++j) src[j] += 16;
    transpose_16x4(src, t);
    #pragma GCC unroll 16
    for (int g = 0; g < 4; ++g) out.u[4 + g] = _mm512_xor_si512(t[g], flip);
    out.off = _mm512_mul_ps(d, _mm512_set1_ps(-128.f));
  } else {
    constexpr int kQsOffset = T == GgmlType::Q4_1 ? 4 : 2;
    for (int j = 0; j < kTileRows; ++j) src[j] = rows[j] + b * kBytes + kQsOffset;
    __m512i t[4];
    transpose_16x4(src, t);
    #pragma GCC unroll 16
    for (int g = 0; g < 4; ++g) {
      out.u[g] = _mm512_and_si512(t[g], low);
      out.u[4 + g] = _mm512_and_si512(_mm512_srli_epi32(t[g], 4), low);
    }
    if constexpr (T == GgmlType::Q4_1) {
      out.off = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(header, 16)));
    } else {
      out.off = _mm512_mul_ps(d, _mm512_set1_ps(-8.f));
    }
  }
}

inline __m512i bcast4(const std::int8_t* p) {
  int v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// acc[c] (16 rows) += packed block b . activation row c0 + c.
template <int kC>
inline void block_dot(const PackedBlock& p, std::int64_t b, std::int64_t nb,
                      const QuantizedActivations& xa, std::int64_t c0, __m512 acc[kC]) {
  __m512i u[8];
  #pragma GCC unroll 16
  for (int g = 0; g < 8; ++g) u[g] = _mm512_load_si512(&p.u[g]);
  #pragma GCC unroll 16
  for (int c = 0; c < kC; ++c) {
    const std::int8_t* xq = xa.qs + ((c0 + c) * nb + b) * 32;
    __m512i i0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[0], bcast4(xq));
    __m512i i1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[1], bcast4(xq + 4));
    #pragma GCC unroll 16
    for (int g = 2; g < 8; g += 2) {
      i0 = _mm512_dpbusd_epi32(i0, u[g], bcast4(xq + 4 * g));
      i1 = _mm512_dpbusd_epi32(i1, u[g + 1], bcast4(xq + 4 * g + 4));
    }
    const std::int64_t k = (c0 + c) * nb + b;
    const __m512 dot = _mm512_cvtepi32_ps(_mm512_add_epi32(i0, i1));
    acc[c] = _mm512_fmadd_ps(dot, _mm512_mul_ps(p.d, _mm512_set1_ps(xa.d[k])), acc[c]);
    acc[c] = _mm512_fmadd_ps(p.off, _mm512_set1_ps(xa.s[k]), acc[c]);
  }
}

// acc[c] (16 rows) += packed tile . activation row c0 + c, over all blocks.
template <int kC>
inline void tile_dot(const PackedBlock* packed, std::int64_t nb, const QuantizedActivations& xa,
                     std::int64_t c0, __m512 acc[kC]) {
  #pragma GCC unroll 16
  for (int c = 0; c < kC; ++c) acc[c] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) block_dot<kC>(packed[b], b, nb, xa, c0, acc);
}

template <int kC>
void tile_rows(const PackedBlock* packed, std::int64_t nb, const QuantizedActivations& xa,
               std::int64_t c0, float* y, std::int64_t y_stride, std::int64_t row0,
               __mmask16 mask) {
  __m512 acc[kC];
  tile_dot<kC>(packed, nb, xa, c0, acc);
  #pragma GCC unroll 16
  for (int c = 0; c < kC; ++c) _mm512_mask_storeu_ps(y + (c0 + c) * y_stride + row0, mask, acc[c]);
}

// Two packed tiles (32 rows) against kC activation rows: every broadcast activation
// load feeds two vpdpbusd, which relieves the load ports (the prefill bottleneck).
template <int kC>
void tile_pair_rows(const PackedBlock* pa, const PackedBlock* pb, std::int64_t nb,
                    const QuantizedActivations& xa, std::int64_t c0, float* y, std::int64_t y_stride,
                    std::int64_t row0) {
  __m512 acc_a[kC], acc_b[kC];
  #pragma GCC unroll 16
  for (int c = 0; c < kC; ++c) acc_a[c] = acc_b[c] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const PackedBlock& ta = pa[b];
    const PackedBlock& tb = pb[b];
    #pragma GCC unroll 16
    for (int c = 0; c < kC; ++c) {
      const std::int8_t* xq = xa.qs + ((c0 + c) * nb + b) * 32;
      __m512i ia = _mm512_setzero_si512(), ib = _mm512_setzero_si512();
      __m512i ja = _mm512_setzero_si512(), jb = _mm512_setzero_si512();
      #pragma GCC unroll 16
      for (int g = 0; g < 8; g += 2) {
        const __m512i x0 = bcast4(xq + 4 * g), x1 = bcast4(xq + 4 * g + 4);
        ia = _mm512_dpbusd_epi32(ia, _mm512_load_si512(&ta.u[g]), x0);
        ib = _mm512_dpbusd_epi32(ib, _mm512_load_si512(&tb.u[g]), x0);
        ja = _mm512_dpbusd_epi32(ja, _mm512_load_si512(&ta.u[g + 1]), x1);
        jb = _mm512_dpbusd_epi32(jb, _mm512_load_si512(&tb.u[g + 1]), x1);
      }
      const std::int64_t k = (c0 + c) * nb + b;
      const __m512 dx = _mm512_set1_ps(xa.d[k]), sx = _mm512_set1_ps(xa.s[k]);
      acc_a[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(ia, ja)), _mm512_mul_ps(ta.d, dx), acc_a[c]);
      acc_b[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(ib, jb)), _mm512_mul_ps(tb.d, dx), acc_b[c]);
      acc_a[c] = _mm512_fmadd_ps(ta.off, sx, acc_a[c]);
      acc_b[c] = _mm512_fmadd_ps(tb.off, sx, acc_b[c]);
    }
  }
  #pragma GCC unroll 16
  for (int c = 0; c < kC; ++c) {
    _mm512_storeu_ps(y + (c0 + c) * y_stride + row0, acc_a[c]);
    _mm512_storeu_ps(y + (c0 + c) * y_stride + row0 + kTileRows, acc_b[c]);
  }
}

struct TileRows {
  const std::uint8_t* rows[kTileRows];
  __m512i offsets;
  const std::uint8_t* base;
  int live;
};

// Row pointers of the tile at row0; rows past the end repeat the last real row.
inline TileRows tile_rows_at(const std::uint8_t* data, std::int64_t rb, std::int64_t row0, std::int64_t r1) {
  TileRows t;
  t.live = int(std::min<std::int64_t>(kTileRows, r1 - row0));
  alignas(64) int offsets[kTileRows];
  for (int j = 0; j < kTileRows; ++j) {
    const int jj = std::min(j, t.live - 1);
    t.rows[j] = data + (row0 + jj) * rb;
    offsets[j] = int(jj * rb);
  }
  t.offsets = _mm512_load_si512(offsets);
  t.base = data + row0 * rb;
  return t;
}

// The hardware prefetchers do not keep up with one core's GEMV: stream the tile
// kPrefetchTiles ahead, in step with the packing of block b (a tile's rows are contiguous).
template <GgmlType T>
inline void prefetch_ahead(const TileRows& t, std::int64_t rb, std::int64_t b, const std::uint8_t* end) {
  constexpr std::int64_t kPerBlock = kTileRows * kBlockBytes<T>;
  const std::uint8_t* ahead = t.base + kPrefetchTiles * kTileRows * rb + b * kPerBlock;
  for (std::int64_t off = 0; off < kPerBlock; off += 64) {
    if (ahead + off < end) _mm_prefetch(reinterpret_cast<const char*>(ahead + off), _MM_HINT_T0);
  }
}

// Decode / tiny batches: each block is packed in registers and used at once.
template <GgmlType T, int kC>
void matmul_tiles_direct(const WeightMatrix& w, const QuantizedActivations& xa, std::int64_t r0,
                         std::int64_t r1, float* y) {
  const std::int64_t nb = xa.num_blocks;
  const std::int64_t rb = nb * kBlockBytes<T>;
  const auto* data = static_cast<const std::uint8_t*>(w.data);
  const std::uint8_t* end = data + w.rows * rb;
  for (std::int64_t row0 = r0; row0 < r1; row0 += kTileRows) {
    const TileRows t = tile_rows_at(data, rb, row0, r1);
    __m512 acc[kC];
    #pragma GCC unroll 16
    for (int c = 0; c < kC; ++c) acc[c] = _mm512_setzero_ps();
    for (std::int64_t b = 0; b < nb; ++b) {
      prefetch_ahead<T>(t, rb, b, end);
      PackedBlock p;
      pack_block<T>(t.rows, t.offsets, t.base, b, p);
      block_dot<kC>(p, b, nb, xa, 0, acc);
    }
    const __mmask16 mask = __mmask16((1u << t.live) - 1);
    #pragma GCC unroll 16
    for (int c = 0; c < kC; ++c) _mm512_mask_storeu_ps(y + c * w.rows + row0, mask, acc[c]);
  }
}

template <GgmlType T>
void matmul_tiles(const WeightMatrix& w, const QuantizedActivations& xa, std::int64_t r0,
                  std::int64_t r1, float* y) {
  switch (xa.m) {
    case 1: return matmul_tiles_direct<T, 1>(w, xa, r0, r1, y);
    case 2: return matmul_tiles_direct<T, 2>(w, xa, r0, r1, y);
    case 3: return matmul_tiles_direct<T, 3>(w, xa, r0, r1, y);
    case 4: return matmul_tiles_direct<T, 4>(w, xa, r0, r1, y);
    case 5: return matmul_tiles_direct<T, 5>(w, xa, r0, r1, y);
    case 6: return matmul_tiles_direct<T, 6>(w, xa, r0, r1, y);
    case 7: return matmul_tiles_direct<T, 7>(w, xa, r0, r1, y);
    case 8: return matmul_tiles_direct<T, 8>(w, xa, r0, r1, y);
    // Batched decode in accurate precision: 8 sequences are 16 activation rows. Up to
    // 16 accumulators still fit in registers, so weights stream once, unpacked in place.
    case 9: return matmul_tiles_direct<T, 9>(w, xa, r0, r1, y);
    case 10: return matmul_tiles_direct<T, 10>(w, xa, r0, r1, y);
    case 11: return matmul_tiles_direct<T, 11>(w, xa, r0, r1, y);
    case 12: return matmul_tiles_direct<T, 12>(w, xa, r0, r1, y);
    case 13: return matmul_tiles_direct<T, 13>(w, xa, r0, r1, y);
    case 14: return matmul_tiles_direct<T, 14>(w, xa, r0, r1, y);
    case 15: return matmul_tiles_direct<T, 15>(w, xa, r0, r1, y);
    case 16: return matmul_tiles_direct<T, 16>(w, xa, r0, r1, y);
    default: break;
  }
  const std::int64_t nb = xa.num_blocks;
  const std::int64_t rb = nb * kBlockBytes<T>;
  thread_local std::vector<PackedBlock> packed;
  if (std::int64_t(packed.size()) < 2 * nb) packed.resize(std::size_t(2 * nb));
  const auto* data = static_cast<const std::uint8_t*>(w.data);
  const std::uint8_t* end = data + w.rows * rb;
  auto pack_tile = [&](const TileRows& t, PackedBlock* dst) {
    for (std::int64_t b = 0; b < nb; ++b) {
      prefetch_ahead<T>(t, rb, b, end);
      pack_block<T>(t.rows, t.offsets, t.base, b, dst[b]);
    }
  };
  std::int64_t row0 = r0;
  // Whole 32-row pairs first (shared activation loads), then single tiles.
  for (; row0 + 2 * kTileRows <= r1; row0 += 2 * kTileRows) {
    pack_tile(tile_rows_at(data, rb, row0, r1), packed.data());
    pack_tile(tile_rows_at(data, rb, row0 + kTileRows, r1), packed.data() + nb);
    std::int64_t c0 = 0;
    for (; c0 + 4 <= xa.m; c0 += 4) tile_pair_rows<4>(packed.data(), packed.data() + nb, nb, xa, c0, y, w.rows, row0);
    switch (xa.m - c0) {
      case 3: tile_pair_rows<3>(packed.data(), packed.data() + nb, nb, xa, c0, y, w.rows, row0); break;
      case 2: tile_pair_rows<2>(packed.data(), packed.data() + nb, nb, xa, c0, y, w.rows, row0); break;
      case 1: tile_pair_rows<1>(packed.data(), packed.data() + nb, nb, xa, c0, y, w.rows, row0); break;
      default: break;
    }
  }
  for (; row0 < r1; row0 += kTileRows) {
    const TileRows t = tile_rows_at(data, rb, row0, r1);
    pack_tile(t, packed.data());
    const __mmask16 mask = __mmask16((1u << t.live) - 1);
    std::int64_t c0 = 0;
    for (; c0 + 8 <= xa.m; c0 += 8) tile_rows<8>(packed.data(), nb, xa, c0, y, w.rows, row0, mask);
    switch (xa.m - c0) {
      case 7: tile_rows<7>(packed.data(), nb, xa, c0, y, w.rows, row0, mask); break;
      case 6: tile_rows<6>(packed.data(), nb, xa, c0, y, w.rows, row0, mask); break;
      case 5: tile_rows<5>(packed.data(), nb, xa, c0, y, w.rows, row0, mask); break;
      case 4: tile_rows<4>(packed.data(), nb, xa, c0, y, w.rows, row0, mask); break;
      case 3: tile_rows<3>(packed.data(), nb, xa, c0, y, w.rows, row0, mask); break;
      case 2: tile_rows<2>(packed.data(), nb, xa, c0, y, w.rows, row0, mask); break;
      case 1: tile_rows<1>(packed.data(), nb, xa, c0, y, w.rows, row0, mask); break;
      default: break;
    }
  }
}

}  // namespace

void matmul_q8_avx512(const WeightMatrix& w, const QuantizedActivations& xa,
                      std::int64_t row_begin, std::int64_t row_end, float* y) {
  switch (w.type) {
    case GgmlType::Q4_0: matmul_tiles<GgmlType::Q4_0>(w, xa, row_begin, row_end, y); return;
    case GgmlType::Q4_1: matmul_tiles<GgmlType::Q4_1>(w, xa, row_begin, row_end, y); return;
    case GgmlType::Q8_0: matmul_tiles<GgmlType::Q8_0>(w, xa, row_begin, row_end, y); return;
    default: return;
  }
}

}  // namespace arbor::kernels::cpu::detail

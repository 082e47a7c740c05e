#include "kernels/cpu/matmul.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cassert>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_features.hpp"
#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/matmul_internal.hpp"
#include "kernels/cpu/thread_pool.hpp"

namespace arbor::kernels::cpu {
namespace {

bool shape_ok(const WeightMatrix& w, std::int64_t m) {
  const BlockShape s = block_shape(w.type);
  return s.values != 0 && w.data != nullptr && w.rows > 0 && w.cols > 0 && m > 0 &&
         w.cols % s.values == 0;
}

const std::uint8_t* row_ptr(const WeightMatrix& w, std::int64_t row) {
  return static_cast<const std::uint8_t*>(w.data) + std::size_t(row) * row_bytes(w.type, w.cols);
}

float dot_f32(const float* a, const float* b, std::int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  std::int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  acc0 = _mm256_add_ps(acc0, acc1);
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc0), _mm256_extractf128_ps(acc0, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  float r = _mm_cvtss_f32(s);
  for (; i < n; ++i) r += a[i] * b[i];
  return r;
}

// Slow path for types without an int8 kernel: dequantize one weight row, then f32
// dot products with every activation row (so each row is dequantized once).
void matmul_generic(const WeightMatrix& w, const float* x, std::int64_t m, float* y,
                    ThreadPool& pool) {
  pool.parallel_for(w.rows, [&](int, std::int64_t r0, std::int64_t r1) {
    thread_local std::vector<float> row;
    row.resize(std::size_t(w.cols));
    for (std::int64_t r = r0; r < r1; ++r) {
      dequantize_row(w.type, row_ptr(w, r), row.data(), w.cols);
      for (std::int64_t i = 0; i < m; ++i) y[i * w.rows + r] = dot_f32(row.data(), x + i * w.cols, w.cols);
    }
  });
}

// Quantizes rows [0, m) of x into `terms` 8-bit terms per activation: term t of row i
// is activation row t * m + i, term 0 quantizes x and term 1 (if any) the residual
// x - d0 * q0, so the kernels need no change to compute with ~16-bit activations.
void quantize_terms(const float* x, std::int64_t m, std::int64_t cols, int terms, ThreadPool& pool,
                    std::int8_t* qs, float* ds, float* ss) {
  const std::int64_t nb = cols / 32;
  auto quantize_rows = [&](std::int64_t b, std::int64_t e) {
    detail::quantize_activations_avx2(x, cols, b, e, qs, ds, ss);
    if (terms < 2) return;
    thread_local std::vector<float> residual;
    residual.resize(std::size_t(cols));
    for (std::int64_t i = b; i < e; ++i) {
      const float* xi = x + i * cols;
      const std::int8_t* q = qs + i * cols;
      for (std::int64_t c = 0; c < cols; ++c) residual[std::size_t(c)] = xi[c] - ds[i * nb + c / 32] * float(q[c]);
      detail::quantize_activations_avx2(residual.data(), cols, 0, 1, qs + (m + i) * cols, ds + (m + i) * nb,
                                        ss + (m + i) * nb);
    }
  };
  if (m >= 16 && pool.num_threads() > 1) {
    pool.parallel_for(m, [&](int, std::int64_t b, std::int64_t e) { quantize_rows(b, e); });
  } else {
    quantize_rows(0, m);
  }
}

void matmul_int8(const WeightMatrix& w, const float* x, std::int64_t m, float* y, ThreadPool& pool,
                 MatmulPrecision precision) {
  const std::int64_t nb = w.cols / 32;
  const int terms = precision == MatmulPrecision::accurate ? 2 : 1;
  const std::int64_t rows = m * terms;  // activation rows the kernels see
  thread_local std::vector<std::int8_t> qs;
  thread_local std::vector<float> ds, ss, partial;
  qs.resize(std::size_t(rows * nb * 32));
  ds.resize(std::size_t(rows * nb));
  ss.resize(std::size_t(rows * nb));
  quantize_terms(x, m, w.cols, terms, pool, qs.data(), ds.data(), ss.data());
  const detail::QuantizedActivations xa{rows, nb, qs.data(), ds.data(), ss.data()};
  float* out = y;
  if (terms > 1) {
    partial.resize(std::size_t(rows * w.rows));
    out = partial.data();
  }
  const bool wide = use_avx512();
  constexpr std::int64_t kTile = 16;
  const std::int64_t num_tiles = (w.rows + kTile - 1) / kTile;
  pool.parallel_for(num_tiles, [&](int, std::int64_t t0, std::int64_t t1) {
    const std::int64_t r0 = t0 * kTile, r1 = std::min(w.rows, t1 * kTile);
    if (wide) detail::matmul_q8_avx512(w, xa, r0, r1, out);
    else detail::matmul_q8_avx2(w, xa, r0, r1, out);
    for (std::int64_t i = 0; terms > 1 && i < m; ++i)  // y = term 0 + term 1
      for (std::int64_t r = r0; r < r1; ++r)
        y[i * w.rows + r] = out[i * w.rows + r] + out[(m + i) * w.rows + r];
  });
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, std::int64_t m, float* y, ThreadPool& pool,
            MatmulPrecision precision) {
  if (!shape_ok(w, m)) {
    assert(false && "matmul: unsupported type or cols not a multiple of the block size");
    if (m > 0 && w.rows > 0) std::fill(y, y + m * w.rows, 0.f);
    return;
  }
  switch (w.type) {
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q8_0: matmul_int8(w, x, m, y, pool, precision); return;
    default: matmul_generic(w, x, m, y, pool); return;
  }
}

void matmul_reference(const WeightMatrix& w, const float* x, std::int64_t m, float* y) {
  if (!shape_ok(w, m)) {
    if (m > 0 && w.rows > 0) std::fill(y, y + m * w.rows, 0.f);
    return;
  }
  std::vector<float> row(std::size_t(w.cols));
  for (std::int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w.type, row_ptr(w, r), row.data(), w.cols);
    for (std::int64_t i = 0; i < m; ++i) {
      double acc = 0.0;
      for (std::int64_t c = 0; c < w.cols; ++c) acc += double(row[c]) * double(x[i * w.cols + c]);
      y[i * w.rows + r] = float(acc);
    }
  }
}

void dequantize_row(const WeightMatrix& w, std::int64_t row, float* dst) {
  dequantize_row(w.type, row_ptr(w, row), dst, w.cols);
}

}  // namespace arbor::kernels::cpu

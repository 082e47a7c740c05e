#include "kernels/cpu/ops.hpp"

#include <immintrin.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/fp16.hpp"
#include "kernels/cpu/simd_math.hpp"

// AVX2 is the baseline ISA, so the "SIMD path" of each op is AVX2 on every machine
// Arbor runs on; these ops are a small share of a forward pass, so AVX-512 variants
// would not pay for their code.
namespace arbor::kernels::cpu {

void rmsnorm(const float* x, const float* weight, int n, float eps, float* out) {
  __m256 acc = _mm256_setzero_ps();
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc = _mm256_fmadd_ps(v, v, acc);
  }
  float sum = simd::hsum(acc);
  for (; i < n; ++i) sum += x[i] * x[i];
  const float inv = 1.f / std::sqrt(sum / float(n) + eps);
  const __m256 vinv = _mm256_set1_ps(inv);
  i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv),
                                            _mm256_loadu_ps(weight + i)));
  }
  for (; i < n; ++i) out[i] = x[i] * inv * weight[i];
}

void rmsnorm_reference(const float* x, const float* weight, int n, float eps, float* out) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += double(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(sum / n + eps);
  for (int i = 0; i < n; ++i) out[i] = float(x[i] * inv * weight[i]);
}

namespace {

// cos/sin of pos * theta^(-2i/rot_dim) for every pair i, cached per thread for all
// positions seen so far (the engine rotates q and k of every layer at the same
// positions, so each angle is computed once, in double precision).
struct RopeTable {
  int rot_dim = 0;
  float theta = 0.f;
  std::vector<float> cs;  // [pos][pair][2]: cos, sin
  int num_positions = 0;

  const float* at(int pos) {
    const int half = rot_dim / 2;
    if (pos >= num_positions) {
      const int grow_to = std::max(pos + 1, num_positions * 2);
      cs.resize(std::size_t(grow_to) * half * 2);
      for (int p = num_positions; p < grow_to; ++p) {
        for (int i = 0; i < half; ++i) {
          const double angle = p * std::pow(double(theta), -2.0 * i / rot_dim);
          cs[(std::size_t(p) * half + i) * 2] = float(std::cos(angle));
          cs[(std::size_t(p) * half + i) * 2 + 1] = float(std::sin(angle));
        }
      }
      num_positions = grow_to;
    }
    return cs.data() + std::size_t(pos) * half * 2;
  }
};

const float* rope_angles(int rot_dim, float theta, int pos) {
  thread_local RopeTable table;
  if (table.rot_dim != rot_dim || table.theta != theta) {
    table = RopeTable{};
    table.rot_dim = rot_dim;
    table.theta = theta;
  }
  return table.at(pos);
}

}  // namespace

void rope(float* x, int num_heads, int head_dim, int rot_dim, int pos, float theta) {
  if (rot_dim <= 0 || pos < 0) return;
  const float* cs = rope_angles(rot_dim, theta, pos);
  const int half = rot_dim / 2;
  for (int h = 0; h < num_heads; ++h) {
    float* v = x + std::size_t(h) * head_dim;
    int i = 0;
    // 4 pairs per step: v = [x0 y0 x1 y1 ...], cs = [c0 s0 c1 s1 ...];
    // out = [x c - y s, x s + y c] = v * [c c] + swap(v) * [-s s].
    for (; i + 4 <= half; i += 4) {
      const __m256 vv = _mm256_loadu_ps(v + 2 * i);
      const __m256 t = _mm256_loadu_ps(cs + 2 * i);
      const __m256 c = _mm256_moveldup_ps(t);
      const __m256 s = _mm256_movehdup_ps(t);
      const __m256 swapped = _mm256_permute_ps(vv, 0xB1);
      _mm256_storeu_ps(v + 2 * i, _mm256_fmaddsub_ps(vv, c, _mm256_mul_ps(swapped, s)));
    }
    for (; i < half; ++i) {
      const float c = cs[2 * i], s = cs[2 * i + 1];
      const float a = v[2 * i], b = v[2 * i + 1];
      v[2 * i] = a * c - b * s;
      v[2 * i + 1] = a * s + b * c;
    }
  }
}

void rope_reference(float* x, int num_heads, int head_dim, int rot_dim, int pos, float theta) {
  for (int h = 0; h < num_heads; ++h) {
    float* v = x + std::size_t(h) * head_dim;
    for (int i = 0; 2 * i < rot_dim; ++i) {
      const double angle = pos * std::pow(double(theta), -2.0 * i / rot_dim);
      const double c = std::cos(angle), s = std::sin(angle);
      const double a = v[2 * i], b = v[2 * i + 1];
      v[2 * i] = float(a * c - b * s);
      v[2 * i + 1] = float(a * s + b * c);
    }
  }
}

void silu_mul(float* gate, const float* up, int n) {
  int i = 0;
  const __m256 one = _mm256_set1_ps(1.f);
  const __m256 neg = _mm256_set1_ps(-0.f);
  for (; i + 8 <= n; i += 8) {
    const __m256 g = _mm256_loadu_ps(gate + i);
    const __m256 e = simd::exp256(_mm256_xor_ps(g, neg));
    const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, e));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) gate[i] = gate[i] / (1.f + std::exp(-gate[i])) * up[i];
}

void silu_mul_reference(float* gate, const float* up, int n) {
  for (int i = 0; i < n; ++i) gate[i] = float(gate[i] / (1.0 + std::exp(-double(gate[i]))) * up[i]);
}

void add_inplace(float* x, const float* y, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(x + i, _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) x[i] += y[i];
}

void softmax(float* x, int n) {
  if (n <= 0) return;
  int i = 0;
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  float mx = simd::hmax(vmax);
  for (; i < n; ++i) mx = std::max(mx, x[i]);
  const __m256 vm = _mm256_set1_ps(mx);
  __m256 vsum = _mm256_setzero_ps();
  i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = simd::exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = simd::hsum(vsum);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const __m256 inv = _mm256_set1_ps(1.f / sum);
  i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  for (; i < n; ++i) x[i] *= 1.f / sum;
}

void softmax_reference(float* x, int n) {
  if (n <= 0) return;
  double mx = x[0];
  for (int i = 1; i < n; ++i) mx = std::max(mx, double(x[i]));
  double sum = 0.0;
  std::vector<double> e(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) sum += e[i] = std::exp(double(x[i]) - mx);
  for (int i = 0; i < n; ++i) x[i] = float(e[i] / sum);
}

int argmax(const float* x, int n) {
  if (n <= 0) return -1;
  // Pass 1: the maximum, four accumulators in flight. _mm256_max_ps returns its second
  // operand when either is NaN, so a NaN in x never enters an accumulator.
  const __m256 lowest = _mm256_set1_ps(-INFINITY);
  __m256 m0 = lowest, m1 = lowest, m2 = lowest, m3 = lowest;
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
    m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
    m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2);
    m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
  }
  for (; i + 8 <= n; i += 8) m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
  float max = simd::hmax(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  // Pass 2: the first position holding it (the row is in cache by now).
  const __m256 vmax = _mm256_set1_ps(max);
  i = 0;
  for (; i + 8 <= n; i += 8) {
    const int hits = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vmax, _CMP_EQ_OQ));
    if (hits != 0) return i + __builtin_ctz(unsigned(hits));
  }
  for (; i < n; ++i)
    if (x[i] == max) return i;
  return 0;  // every value is NaN
}

void masked_exp(const float* x, int n, float shift, float scale, float floor, float* out) {
  const __m256 vshift = _mm256_set1_ps(shift), vscale = _mm256_set1_ps(scale), vfloor = _mm256_set1_ps(floor);
  const __m256 infinity = _mm256_set1_ps(INFINITY), abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 keep = _mm256_and_ps(_mm256_cmp_ps(v, vfloor, _CMP_GE_OQ),
                                      _mm256_cmp_ps(_mm256_and_ps(v, abs_mask), infinity, _CMP_LT_OQ));
    const __m256 e = simd::exp256(_mm256_mul_ps(_mm256_sub_ps(v, vshift), vscale));
    _mm256_storeu_ps(out + i, _mm256_and_ps(e, keep));
  }
  for (; i < n; ++i) {  // the tail through the same vector code, one lane used
    alignas(32) float lane[8] = {x[i], 0, 0, 0, 0, 0, 0, 0};
    masked_exp(lane, 8, shift, scale, floor, lane);
    out[i] = lane[0];
  }
}

int argmax_reference(const float* x, int n) {
  int best = -1;
  for (int i = 0; i < n; ++i)
    if (!std::isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
  return n > 0 && best < 0 ? 0 : best;
}

void fp32_to_fp16_row(const float* src, std::uint16_t* dst, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  }
  for (; i < n; ++i) dst[i] = fp32_to_fp16(src[i]);
}

void fp16_to_fp32_row(const std::uint16_t* src, float* dst, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  }
  for (; i < n; ++i) dst[i] = fp16_to_fp32(src[i]);
}

}  // namespace arbor::kernels::cpu

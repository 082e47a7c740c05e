// Every matmul path (int8 AVX2 / AVX-512 VNNI, generic f32) against the scalar
// reference, on fresh random inputs, for odd shapes, 1 and 2 threads.
#include "kernels/cpu/matmul.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/cpu/dequantize.hpp"
#include "kernels/cpu/fp16.hpp"
#include "kernels/cpu/thread_pool.hpp"
#include "kernel_test_util.hpp"

namespace arbor::kernels::cpu {
namespace {

using testing::for_each_isa;
using testing::random_floats;
using testing::random_weights;

bool is_int8_path(GgmlType t) {
  return t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q8_0;
}

// Checks y against the reference with a per-element bound derived from the error
// sources: for the int8 paths, activation quantization moves each x by at most half a
// quantization step (max|x| of its 32-block / 254); the accurate precision quantizes
// that residual again, which shrinks the step at least 127-fold; f32 paths only round.
void check(const WeightMatrix& w, const std::vector<float>& x, std::int64_t m,
           const std::vector<float>& y, const std::vector<float>& ref, const std::string& what,
           MatmulPrecision precision = MatmulPrecision::fast) {
  const double step_scale = precision == MatmulPrecision::accurate ? 1.0 / 127.0 : 1.0;
  std::vector<float> row(std::size_t(w.cols));
  std::vector<float> half_step(x.size());
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t b = 0; b < w.cols; b += 32) {
      float amax = 0.f;
      for (std::int64_t c = b; c < std::min(w.cols, b + 32); ++c) amax = std::max(amax, std::fabs(x[i * w.cols + c]));
      for (std::int64_t c = b; c < std::min(w.cols, b + 32); ++c) half_step[i * w.cols + c] = amax / 254.f;
    }
  }
  for (std::int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, row.data());
    for (std::int64_t i = 0; i < m; ++i) {
      double abs_sum = 0.0, quant_err = 0.0;
      for (std::int64_t c = 0; c < w.cols; ++c) {
        abs_sum += std::fabs(double(row[c]) * x[i * w.cols + c]);
        quant_err += std::fabs(double(row[c])) * half_step[i * w.cols + c];
      }
      const double bound = (is_int8_path(w.type) ? quant_err * step_scale * 1.001 : 0.0) + 2e-5 * abs_sum + 1e-6;
      const float got = y[i * w.rows + r], want = ref[i * w.rows + r];
      ASSERT_LE(std::fabs(double(got) - want), bound)
          << what << " row " << r << " act " << i << ": got " << got << " want " << want;
    }
  }
}

struct Shape {
  std::int64_t rows, cols, m;
};

TEST(Matmul, AllTypesMatchReference) {
  std::mt19937 rng(1234);
  ThreadPool pool1(1), pool2(2);
  const Shape shapes[] = {{1, 256, 1},  {37, 256, 1}, {16, 512, 3},  {45, 256, 9},
                          {33, 768, 17}, {70, 256, 2}, {17, 256, 33}, {50, 256, 8}, {31, 256, 5},
                          {40, 256, 12}, {18, 256, 16}};
  for (GgmlType type : testing::kAllTypes) {
    for (const Shape& s : shapes) {
      const auto data = random_weights(rng, type, s.rows, s.cols);
      const WeightMatrix w{type, data.data(), s.rows, s.cols};
      const auto x = random_floats(rng, std::size_t(s.m * s.cols), -2.f, 2.f);
      std::vector<float> ref(std::size_t(s.m * s.rows));
      matmul_reference(w, x.data(), s.m, ref.data());
      for_each_isa([&](bool avx512) {
        for (ThreadPool* pool : {&pool1, &pool2}) {
          for (MatmulPrecision precision : {MatmulPrecision::fast, MatmulPrecision::accurate}) {
            std::vector<float> y(ref.size(), NAN);
            matmul(w, x.data(), s.m, y.data(), *pool, precision);
            check(w, x, s.m, y, ref,
                  std::string(type_name(type)) + (avx512 ? " avx512" : " avx2") + " rows " +
                      std::to_string(s.rows) + " cols " + std::to_string(s.cols) + " m " +
                      std::to_string(s.m) + " threads " + std::to_string(pool->num_threads()) +
                      (precision == MatmulPrecision::accurate ? " accurate" : " fast"),
                  precision);
          }
        }
      });
    }
  }
}

TEST(Matmul, SmolLmShapesQ4_1AndQ8_0) {
  std::mt19937 rng(99);
  ThreadPool pool(2);
  const Shape shapes[] = {{576, 576, 1}, {192, 576, 4}, {1536, 576, 1}, {576, 1536, 7}, {1000, 576, 64}};
  for (GgmlType type : {GgmlType::Q4_1, GgmlType::Q8_0}) {
    for (const Shape& s : shapes) {
      const auto data = random_weights(rng, type, s.rows, s.cols);
      const WeightMatrix w{type, data.data(), s.rows, s.cols};
      const auto x = random_floats(rng, std::size_t(s.m * s.cols));
      std::vector<float> ref(std::size_t(s.m * s.rows));
      matmul_reference(w, x.data(), s.m, ref.data());
      for_each_isa([&](bool avx512) {
        for (MatmulPrecision precision : {MatmulPrecision::fast, MatmulPrecision::accurate}) {
          std::vector<float> y(ref.size(), NAN);
          matmul(w, x.data(), s.m, y.data(), pool, precision);
          check(w, x, s.m, y, ref, std::string(type_name(type)) + (avx512 ? " avx512" : " avx2"), precision);
        }
      });
    }
  }
}

// Q8_0 with quants at -128 and +127 everywhere: the AVX2 maddubs path must not
// saturate, the VNNI path must handle the +128 bias exactly.
TEST(Matmul, Q8_0ExtremeQuants) {
  ThreadPool pool(2);
  const std::int64_t rows = 19, cols = 128;
  std::vector<BlockQ8_0> blocks(std::size_t(rows * cols / 32));
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    blocks[i].d = fp32_to_fp16(0.01f);
    for (int j = 0; j < 32; ++j) blocks[i].qs[j] = std::int8_t((i + j) % 2 ? -128 : 127);
  }
  const WeightMatrix w{GgmlType::Q8_0, blocks.data(), rows, cols};
  std::vector<float> x(cols);
  for (std::int64_t c = 0; c < cols; ++c) x[c] = c % 2 ? -1.f : 1.f;
  std::vector<float> ref(rows);
  matmul_reference(w, x.data(), 1, ref.data());
  for_each_isa([&](bool) {
    std::vector<float> y(rows, NAN);
    matmul(w, x.data(), 1, y.data(), pool);
    for (std::int64_t r = 0; r < rows; ++r) EXPECT_NEAR(y[r], ref[r], 1e-3f * std::fabs(ref[r]) + 1e-4f);
  });
}

TEST(Matmul, ZeroActivationsGiveZero) {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  const auto data = random_weights(rng, GgmlType::Q4_1, 20, 64);
  const WeightMatrix w{GgmlType::Q4_1, data.data(), 20, 64};
  std::vector<float> x(64, 0.f), y(20, NAN);
  for_each_isa([&](bool) {
    matmul(w, x.data(), 1, y.data(), pool);
    for (float v : y) EXPECT_EQ(v, 0.f);
  });
}

}  // namespace
}  // namespace arbor::kernels::cpu

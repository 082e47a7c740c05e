// The CUDA matmul (quantized GEMV for decode, the tensor-core GEMM up to
// kQuantizedGemmMaxRows rows, f16 tiles + cuBLAS GemmEx past it, SGEMM for F32) against
// the CPU's scalar reference, for every device type, odd row counts, and activation
// counts on both sides of each switch.
#include "kernels/cuda/matmul.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "cuda_test_util.hpp"
#include "kernels/kernel_test_util.hpp"
#include "kernels/cpu/matmul.hpp"

namespace arbor::kernels::cuda {
namespace {

using kernels::testing::random_floats;
using kernels::testing::random_weights;
using testing::to_device;
using testing::to_host;
using testing::upload;

// |got - want| within `relative` of the sum of |w| |x| over the row for every output:
// 1e-5 is what f32 summation in another order can move; 1.2e-3 adds one f16 rounding
// (2^-11 relative) of each operand.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::vector<float>& bound,
                  float relative, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::abs(got[i] - want[i]), relative * bound[i] + 1e-6f) << what << " at " << i;
}

constexpr float kF32Tolerance = 1e-5f, kHalfTolerance = 1.2e-3f;

// The CPU's reference product of x [m][cols] with `w`, and each output's sum of |w| |x|
// (the scale of its rounding error).
struct Reference {
  std::vector<float> want, bound;
};
Reference reference_product(const WeightMatrix& w, const std::vector<float>& x, std::int64_t m) {
  Reference ref{std::vector<float>(static_cast<std::size_t>(m * w.rows)), std::vector<float>(std::size_t(m * w.rows))};
  cpu::matmul_reference(w, x.data(), m, ref.want.data());
  std::vector<float> row(static_cast<std::size_t>(w.cols));
  for (std::int64_t r = 0; r < w.rows; ++r) {
    cpu::dequantize_row(w, r, row.data());
    for (std::int64_t i = 0; i < m; ++i) {
      float b = 0;
      for (std::int64_t c = 0; c < w.cols; ++c) b += std::abs(row[std::size_t(c)] * x[std::size_t(i * w.cols + c)]);
      ref.bound[std::size_t(i * w.rows + r)] = b;
    }
  }
  return ref;
}

// Each test runs on a device (skipped without one) with an initialised Matmul.
class CudaMatmul : public ::testing::Test {
 protected:
  void SetUp() override {
    ARBOR_REQUIRE_CUDA();
    ASSERT_TRUE(mm.init(nullptr, &error)) << error;
  }
  Matmul mm;
  std::string error;
};

TEST_F(CudaMatmul, EveryTypeAndRowCountMatchesTheReference) {
  std::mt19937 rng(7);
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::F32}) {
    for (std::int64_t cols : {32, 576, 4096}) {
      const std::int64_t rows = 77;
      const auto bytes = random_weights(rng, type, rows, cols);
      const WeightMatrix host{type, bytes.data(), rows, cols};
      DeviceBuffer d_w;
      const DeviceMatrix w = upload(type, bytes, rows, cols, d_w);
      // GEMV (<= 8 rows), tensor-core GEMM (9..64 and 65..128: its two instances,
      // fragments partly and wholly past m), f16 tiles + cuBLAS (129 on).
      for (std::int64_t m : {1, 3, 8, 9, 37, 64, 65, 100, 128, 129}) {
        const auto x = random_floats(rng, std::size_t(m * cols));
        auto d_x = to_device(x);
        DeviceBuffer d_y = to_device(std::vector<float>(std::size_t(m * rows)));
        ASSERT_TRUE(mm.run(w, d_x.as<float>(), m, d_y.as<float>(), &error)) << error;
        const Reference ref = reference_product(host, x, m);
        const bool half_gemm = type != GgmlType::F32 && m > kGemvMaxRows;
        expect_close(to_host<float>(d_y, ref.want.size()), ref.want, ref.bound,
                     half_gemm ? kHalfTolerance : kF32Tolerance,
                     std::string(type_name(type)) + " cols " + std::to_string(cols) + " m " + std::to_string(m));
      }
    }
  }
}

// The FFN's SwiGLU, silu(x gate^T) * (x up^T), against the reference products gated on
// the host: one GEMV launch (m <= kGemvMaxRows; gate and up of different types too),
// else the two products then the gating (f16 GEMMs; F32's SGEMM). Each output is within
// the products' tolerance carried through the gating: |d silu(g)/dg| <= 1.1, so
// 1.1 |u| bound(g) + |silu(g)| bound(u).
TEST_F(CudaMatmul, SwigluMatchesTheReferenceProductsGated) {
  std::mt19937 rng(10);
  const std::int64_t rows = 45, cols = 576;
  for (auto [gate_type, up_type] : {std::pair{GgmlType::Q4_1, GgmlType::Q4_1}, std::pair{GgmlType::Q4_0, GgmlType::Q8_0},
                                    std::pair{GgmlType::F32, GgmlType::F32}}) {
    const auto gate_bytes = random_weights(rng, gate_type, rows, cols), up_bytes = random_weights(rng, up_type, rows, cols);
    DeviceBuffer d_gate_w, d_up_w;
    const DeviceMatrix gate = upload(gate_type, gate_bytes, rows, cols, d_gate_w);
    const DeviceMatrix up = upload(up_type, up_bytes, rows, cols, d_up_w);
    for (std::int64_t m : {1, 4, 8, 9}) {
      const std::string what = std::string(type_name(gate_type)) + "/" + type_name(up_type) + " m " + std::to_string(m);
      const auto x = random_floats(rng, std::size_t(m * cols));
      auto d_x = to_device(x);
      DeviceBuffer d_out = to_device(std::vector<float>(std::size_t(m * rows)));
      DeviceBuffer d_scratch = to_device(std::vector<float>(std::size_t(m * rows)));
      ASSERT_TRUE(mm.run_swiglu(gate, up, d_x.as<float>(), m, d_out.as<float>(), d_scratch.as<float>(), &error))
          << error;
      const Reference g = reference_product(WeightMatrix{gate_type, gate_bytes.data(), rows, cols}, x, m);
      const Reference u = reference_product(WeightMatrix{up_type, up_bytes.data(), rows, cols}, x, m);
      std::vector<float> want(g.want.size()), bound(g.want.size());
      for (std::size_t i = 0; i < want.size(); ++i) {
        const float silu = g.want[i] / (1.f + std::exp(-g.want[i]));
        want[i] = silu * u.want[i];
        bound[i] = 1.1f * std::abs(u.want[i]) * g.bound[i] + std::abs(silu) * u.bound[i];
      }
      const bool half_gemm = gate_type != GgmlType::F32 && m > kGemvMaxRows;
      expect_close(to_host<float>(d_out, want.size()), want, bound, half_gemm ? kHalfTolerance : kF32Tolerance, what);
    }
  }
}

// With the GEMV handing over at fewer rows (set_gemv_max_rows), products of 1-8 rows take
// the tensor-core GEMM (its fragments mostly past m): within the f16 tolerance of the
// reference, and not the GEMV's f32 result. The group and the SwiGLU follow the same
// switch.
TEST_F(CudaMatmul, PastTheGemvsRowsFewRowsTakeTheTensorCoreGemm) {
  std::mt19937 rng(12);
  const std::int64_t rows = 40, cols = 576;
  const auto bytes = random_weights(rng, GgmlType::Q4_0, rows, cols);
  DeviceBuffer d_w;
  const DeviceMatrix w = upload(GgmlType::Q4_0, bytes, rows, cols, d_w);
  for (int max_rows : {0, 2}) {
    for (std::int64_t m : {1, 3, 8}) {
      SCOPED_TRACE("GEMV up to " + std::to_string(max_rows) + " rows, m " + std::to_string(m));
      const auto x = random_floats(rng, std::size_t(m * cols));
      auto d_x = to_device(x);
      const std::size_t n = std::size_t(m * rows);
      DeviceBuffer d_gemv = to_device(std::vector<float>(n)), d_y = to_device(std::vector<float>(n));
      DeviceBuffer d_group = to_device(std::vector<float>(n)), d_scratch = to_device(std::vector<float>(n));
      DeviceBuffer d_swiglu = to_device(std::vector<float>(n)), d_swiglu_gemv = to_device(std::vector<float>(n));
      mm.set_gemv_max_rows(kGemvMaxRows);
      ASSERT_TRUE(mm.run(w, d_x.as<float>(), m, d_gemv.as<float>(), &error)) << error;
      ASSERT_TRUE(mm.run_swiglu(w, w, d_x.as<float>(), m, d_swiglu_gemv.as<float>(), d_scratch.as<float>(), &error));
      mm.set_gemv_max_rows(max_rows);
      EXPECT_EQ(mm.gemv_max_rows(), max_rows);
      ASSERT_TRUE(mm.run(w, d_x.as<float>(), m, d_y.as<float>(), &error)) << error;
      const MatmulTarget target{w, d_group.as<float>()};
      ASSERT_TRUE(mm.run_group(&target, 1, d_x.as<float>(), m, &error)) << error;
      ASSERT_TRUE(mm.run_swiglu(w, w, d_x.as<float>(), m, d_swiglu.as<float>(), d_scratch.as<float>(), &error));
      const Reference ref = reference_product(WeightMatrix{GgmlType::Q4_0, bytes.data(), rows, cols}, x, m);
      const auto got = to_host<float>(d_y, n), gemv = to_host<float>(d_gemv, n);
      const bool gemv_path = m <= max_rows;
      expect_close(got, ref.want, ref.bound, gemv_path ? kF32Tolerance : kHalfTolerance, "run");
      if (gemv_path) {
        EXPECT_EQ(got, gemv);
      } else {
        EXPECT_NE(got, gemv) << "the GEMM rounds the activations to f16";
      }
      EXPECT_EQ(to_host<float>(d_group, n), got) << "a group of one is run()";
      EXPECT_EQ(to_host<float>(d_swiglu, n) == to_host<float>(d_swiglu_gemv, n), gemv_path);
    }
  }
}

// x rounded as the int8 GEMV rounds it (Q8Activations): per 32 values, d = max |x| / 127
// and each value q * d, q = x / d rounded to nearest.
std::vector<float> rounded_to_q8(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (std::size_t b = 0; b < x.size(); b += 32) {
    float amax = 0.f;
    for (std::size_t j = b; j < b + 32; ++j) amax = std::max(amax, std::abs(x[j]));
    const float d = amax / 127.f;
    for (std::size_t j = b; j < b + 32; ++j) out[j] = d > 0.f ? std::rint(x[j] / d) * d : 0.f;
  }
  return out;
}

// With int8 activations (set_gemv_int8) the GEMV, its group and its SwiGLU give the f32
// reference product of the rounded activations, for every type (Q4_0's offset and
// Q4_1's minimum go through d * sum(q)); and not the product of x itself. Past the GEMV
// (9 rows) nothing changes: the GEMM takes f16 activations as before.
TEST_F(CudaMatmul, Int8GemvIsTheProductOfTheRoundedActivations) {
  std::mt19937 rng(14);
  const std::int64_t rows = 37, cols = 4096;
  mm.set_gemv_int8(true);
  ASSERT_TRUE(mm.gemv_int8());
  for (GgmlType type : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0}) {
    const auto bytes = random_weights(rng, type, rows, cols);
    const WeightMatrix host{type, bytes.data(), rows, cols};
    DeviceBuffer d_w;
    const DeviceMatrix w = upload(type, bytes, rows, cols, d_w);
    for (std::int64_t m : {1, 3, 8, 9}) {
      SCOPED_TRACE(std::string(type_name(type)) + " m " + std::to_string(m));
      const auto x = random_floats(rng, std::size_t(m * cols));
      auto d_x = to_device(x);
      const std::size_t n = std::size_t(m * rows);
      DeviceBuffer d_y = to_device(std::vector<float>(n)), d_group = to_device(std::vector<float>(n));
      DeviceBuffer d_swiglu = to_device(std::vector<float>(n)), d_scratch = to_device(std::vector<float>(n));
      ASSERT_TRUE(mm.run(w, d_x.as<float>(), m, d_y.as<float>(), &error)) << error;
      const MatmulTarget target{w, d_group.as<float>()};
      ASSERT_TRUE(mm.run_group(&target, 1, d_x.as<float>(), m, &error)) << error;
      ASSERT_TRUE(mm.run_swiglu(w, w, d_x.as<float>(), m, d_swiglu.as<float>(), d_scratch.as<float>(), &error));
      const auto got = to_host<float>(d_y, n);
      if (m > kGemvMaxRows) {
        const Reference ref = reference_product(host, x, m);
        expect_close(got, ref.want, ref.bound, kHalfTolerance, "the GEMM");
        continue;
      }
      const Reference rounded = reference_product(host, rounded_to_q8(x), m);
      expect_close(got, rounded.want, rounded.bound, kF32Tolerance, "run");
      EXPECT_EQ(to_host<float>(d_group, n), got) << "a group of one is run()";
      const auto swiglu = to_host<float>(d_swiglu, n);
      for (std::size_t i = 0; i < n; ++i)
        ASSERT_NEAR(swiglu[i], got[i] / (1.f + std::exp(-got[i])) * got[i], 1e-5f * (1.f + got[i] * got[i])) << i;
      // The rounding is visible: x's own product differs by more than f32 summation.
      const Reference exact = reference_product(host, x, m);
      bool differs = false;
      for (std::size_t i = 0; i < n; ++i)
        differs = differs || std::abs(got[i] - exact.want[i]) > kF32Tolerance * exact.bound[i] + 1e-6f;
      EXPECT_TRUE(differs) << "int8 activations left every output as the f32 GEMV's";
    }
  }
}

// A group (Q, K, V of different heights and types; or with an F32 member, or more rows
// than the GEMV takes, which run one matmul each) gives each target exactly what run()
// gives it alone.
TEST_F(CudaMatmul, AGroupGivesEachTargetItsOwnProduct) {
  std::mt19937 rng(9);
  const std::int64_t cols = 576;
  for (auto types : {std::vector<GgmlType>{GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q4_0},
                     std::vector<GgmlType>{GgmlType::Q4_0, GgmlType::F32}}) {
    const std::vector<std::int64_t> heights = {77, 33, 40};
    std::vector<DeviceBuffer> weights;
    std::vector<DeviceMatrix> matrices;
    for (std::size_t t = 0; t < types.size(); ++t) {
      matrices.push_back(upload(types[t], random_weights(rng, types[t], heights[t], cols), heights[t], cols,
                                weights.emplace_back()));
    }
    for (std::int64_t m : {1, 5, 8, 9}) {
      SCOPED_TRACE("m " + std::to_string(m) + ", " + std::to_string(types.size()) + " targets");
      auto d_x = to_device(random_floats(rng, std::size_t(m * cols)));
      std::vector<DeviceBuffer> grouped, alone;
      std::vector<MatmulTarget> targets;
      for (const DeviceMatrix& w : matrices) {
        grouped.push_back(to_device(std::vector<float>(std::size_t(m * w.rows))));
        alone.push_back(to_device(std::vector<float>(std::size_t(m * w.rows))));
        targets.push_back({w, grouped.back().as<float>()});
      }
      ASSERT_TRUE(mm.run_group(targets.data(), int(targets.size()), d_x.as<float>(), m, &error)) << error;
      for (std::size_t t = 0; t < matrices.size(); ++t) {
        ASSERT_TRUE(mm.run(matrices[t], d_x.as<float>(), m, alone[t].as<float>(), &error)) << error;
        const std::size_t n = std::size_t(m * matrices[t].rows);
        EXPECT_EQ(to_host<float>(grouped[t], n), to_host<float>(alone[t], n)) << "target " << t;
      }
    }
  }
}

// Prefill rows (past the tensor-core GEMM) of a matrix too large for one scratch tile go
// through several tiles.
TEST_F(CudaMatmul, TiledPrefillCoversEveryRow) {
  std::mt19937 rng(8);
  const std::int64_t rows = 17000, cols = 4096, m = kQuantizedGemmMaxRows + 1;  // > 64 Mi halves: two tiles
  const auto bytes = random_weights(rng, GgmlType::Q4_0, rows, cols);
  DeviceBuffer d_w;
  const DeviceMatrix w = upload(GgmlType::Q4_0, bytes, rows, cols, d_w);
  const auto x = random_floats(rng, std::size_t(m * cols));
  auto d_x = to_device(x);
  DeviceBuffer d_y = to_device(std::vector<float>(std::size_t(m * rows)));
  ASSERT_TRUE(mm.run(w, d_x.as<float>(), m, d_y.as<float>(), &error)) << error;
  std::vector<float> want(static_cast<std::size_t>(m * rows));
  cpu::matmul_reference(WeightMatrix{GgmlType::Q4_0, bytes.data(), rows, cols}, x.data(), m, want.data());
  const auto got = to_host<float>(d_y, want.size());
  // Within 1% of the outputs' RMS: f16 rounding moves them ~0.05% of it, a row of
  // another tile or a row left unwritten ~100%.
  double squares = 0;
  for (float v : want) squares += double(v) * v;
  const double tolerance = 0.01 * std::sqrt(squares / double(want.size()));
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tolerance) << i;
}

// Activations past f16's range saturate at +-65504 instead of becoming infinities (whose
// products would turn the outputs into NaN), and the GEMM still sums in f32: outputs past
// f16's range come out exact.
TEST_F(CudaMatmul, HalfGemmSaturatesActivationsAndAccumulatesInF32) {
  std::mt19937 rng(11);
  const std::int64_t rows = 5, cols = 64;
  const auto bytes = random_weights(rng, GgmlType::Q8_0, rows, cols);
  DeviceBuffer d_w;
  const DeviceMatrix w = upload(GgmlType::Q8_0, bytes, rows, cols, d_w);
  const WeightMatrix host{GgmlType::Q8_0, bytes.data(), rows, cols};
  for (const std::int64_t m : {kGemvMaxRows + 1, kQuantizedGemmMaxRows, kQuantizedGemmMaxRows + 1}) {  // f16 paths
    SCOPED_TRACE("m " + std::to_string(m));
    std::vector<float> x(std::size_t(m * cols), 1000.f);
    x[0] = 1e6f;  // row 0, column 0: saturates to 65504
    x[1] = -1e9f;
    auto d_x = to_device(x);
    DeviceBuffer d_y = to_device(std::vector<float>(std::size_t(m * rows)));
    ASSERT_TRUE(mm.run(w, d_x.as<float>(), m, d_y.as<float>(), &error)) << error;
    const auto got = to_host<float>(d_y, std::size_t(m * rows));
    std::vector<float> row(static_cast<std::size_t>(cols));
    for (std::int64_t r = 0; r < rows; ++r) {
      cpu::dequantize_row(host, r, row.data());
      for (std::int64_t i = 0; i < m; ++i) {
        double want = 0, bound = 0;
        for (std::int64_t c = 0; c < cols; ++c) {
          const double xc = i == 0 && c == 0 ? 65504.0 : i == 0 && c == 1 ? -65504.0 : 1000.0;
          want += double(__half2float(__float2half_rn(row[std::size_t(c)]))) * xc;
          bound += std::abs(double(row[std::size_t(c)]) * xc);
        }
        const float y = got[std::size_t(i * rows + r)];
        ASSERT_TRUE(std::isfinite(y)) << "row " << i << " feature " << r;
        EXPECT_NEAR(y, want, 1e-5 * bound + 1e-3) << "row " << i << " feature " << r;
      }
    }
  }
}

// The GEMV reads activations 128 bits at a time: a pointer off that alignment is refused
// with the reason instead of faulting on the device.
TEST_F(CudaMatmul, MisalignedActivationsAreRefused) {
  std::mt19937 rng(12);
  DeviceBuffer d_w;
  const DeviceMatrix w = upload(GgmlType::Q4_0, random_weights(rng, GgmlType::Q4_0, 4, 32), 4, 32, d_w);
  auto d_x = to_device(random_floats(rng, 33));
  DeviceBuffer d_y = to_device(std::vector<float>(4));
  EXPECT_FALSE(mm.run(w, d_x.as<float>() + 1, 1, d_y.as<float>(), &error));
  EXPECT_NE(error.find("16-byte aligned"), std::string::npos) << error;
  const MatmulTarget target{w, d_y.as<float>()};
  EXPECT_FALSE(mm.run_group(&target, 1, d_x.as<float>() + 1, 1, &error));
  EXPECT_TRUE(mm.run(w, d_x.as<float>(), 1, d_y.as<float>(), &error)) << error;
}

}  // namespace
}  // namespace arbor::kernels::cuda

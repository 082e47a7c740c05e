// Helpers for the kernel tests: random inputs and random (valid) ggml weight rows.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_features.hpp"
#include "kernels/ggml_types.hpp"

namespace arbor::kernels::testing {

inline std::vector<float> random_floats(std::mt19937& rng, std::size_t n, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Bytes of a rows x cols matrix of `type` with random but meaningful contents: scales
// of sensible magnitude, every quant bit pattern possible.
inline std::vector<std::uint8_t> random_weights(std::mt19937& rng, GgmlType type, std::int64_t rows,
                                                std::int64_t cols) {
  const std::size_t rb = row_bytes(type, cols);
  std::vector<std::uint8_t> data(rb * rows);
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& b : data) b = std::uint8_t(byte(rng));
  std::uniform_real_distribution<float> scale(0.005f, 0.05f), offset(-0.3f, 0.1f), f(-1.f, 1.f);
  auto put16 = [](std::uint8_t* p, std::uint16_t v) { std::memcpy(p, &v, 2); };
  const BlockShape s = block_shape(type);
  const std::int64_t nblocks = std::int64_t(rows) * (cols / s.values);
  for (std::int64_t i = 0; i < nblocks; ++i) {
    std::uint8_t* b = data.data() + i * s.bytes;
    switch (type) {
      case GgmlType::F32: {
        const float x = f(rng);
        std::memcpy(b, &x, 4);
        break;
      }
      case GgmlType::F16: put16(b, fp32_to_fp16_scalar(f(rng))); break;
      case GgmlType::BF16: put16(b, fp32_to_bf16(f(rng))); break;
      case GgmlType::Q4_0:
      case GgmlType::Q8_0: put16(b, fp32_to_fp16_scalar(scale(rng))); break;
      case GgmlType::Q4_1:
        put16(b, fp32_to_fp16_scalar(scale(rng)));
        put16(b + 2, fp32_to_fp16_scalar(offset(rng)));
        break;
      case GgmlType::Q4_K:
        put16(b, fp32_to_fp16_scalar(scale(rng) * 0.1f));
        put16(b + 2, fp32_to_fp16_scalar(scale(rng) * 0.1f));
        break;
      case GgmlType::Q6_K: put16(b + 208, fp32_to_fp16_scalar(scale(rng) * 0.05f)); break;
    }
  }
  return data;
}

inline constexpr GgmlType kAllTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16,
                                         GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0,
                                         GgmlType::Q4_K, GgmlType::Q6_K};

// Runs the body once with AVX-512 paths forced off and, where the CPU has them, once on.
template <typename Fn>
void for_each_isa(Fn&& fn) {
  cpu::set_avx512_override(0);
  fn(false);
  if (cpu::cpu_features().avx512_ok()) {
    cpu::set_avx512_override(1);
    fn(true);
  }
  cpu::set_avx512_override(-1);
}

}  // namespace arbor::kernels::testing

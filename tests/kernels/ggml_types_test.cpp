#include "kernels/ggml_types.hpp"
#include "kernels/cpu/fp16.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace arbor::kernels::cpu {
namespace {

TEST(GgmlTypes, BlockShapesAndRowBytes) {
  EXPECT_EQ(block_shape(GgmlType::Q4_1).values, 32);
  EXPECT_EQ(block_shape(GgmlType::Q4_1).bytes, 20);
  EXPECT_EQ(block_shape(GgmlType::Q6_K).bytes, 210);
  EXPECT_EQ(row_bytes(GgmlType::Q4_1, 576), 18u * 20u);
  EXPECT_EQ(row_bytes(GgmlType::Q8_0, 576), 18u * 34u);
  EXPECT_EQ(row_bytes(GgmlType::Q4_K, 512), 2u * 144u);
  EXPECT_EQ(row_bytes(GgmlType::F16, 7), 14u);
  EXPECT_EQ(row_bytes(GgmlType::F32, 7), 28u);
  EXPECT_FALSE(is_supported(GgmlType(6)));  // Q5_0
  EXPECT_EQ(row_bytes(GgmlType(6), 32), 0u);
  EXPECT_STREQ(type_name(GgmlType::Q8_0), "Q8_0");
  EXPECT_STREQ(type_name(GgmlType(99)), "unsupported");
}

TEST(GgmlTypes, Fp16KnownValues) {
  EXPECT_EQ(fp16_to_fp32(0x3C00), 1.f);
  EXPECT_EQ(fp16_to_fp32(0xC000), -2.f);
  EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.f, -24));
  EXPECT_EQ(fp32_to_fp16(1.f), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(65520.f), 0x7C00);          // rounds up to inf
  EXPECT_EQ(fp32_to_fp16(1.f + std::ldexp(1.f, -11)), 0x3C00);  // tie -> even
  EXPECT_EQ(fp32_to_fp16(1.f + 3 * std::ldexp(1.f, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(fp32_to_fp16_scalar(1.f + std::ldexp(1.f, -11)), 0x3C00);
  EXPECT_EQ(fp32_to_fp16_scalar(1.f + 3 * std::ldexp(1.f, -11)), 0x3C02);
  EXPECT_EQ(bf16_to_fp32(0x3F80), 1.f);
  EXPECT_EQ(bf16_to_fp32(0xC040), -3.f);
  EXPECT_EQ(fp32_to_bf16(1.f), 0x3F80);
}

TEST(GgmlTypes, Fp16ToFp32AllValuesMatchScalar) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float a = fp16_to_fp32(std::uint16_t(h)), b = fp16_to_fp32_scalar(std::uint16_t(h));
    if (std::isnan(a)) {
      EXPECT_TRUE(std::isnan(b)) << h;
      continue;
    }
    ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << "half bits " << h;
  }
}

TEST(GgmlTypes, Fp32ToFp16RoundTripsAndMatchesScalar) {
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_fp32_scalar(std::uint16_t(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16_scalar(f), h);
    ASSERT_EQ(fp32_to_fp16(f), h);
  }
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    std::uint32_t u = bits(rng);
    if (i % 2) u = (u & 0x87FFFFFFu) | 0x30000000u;  // bias toward the half range
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), fp32_to_fp16_scalar(f)) << std::hex << u;
  }
}

}  // namespace
}  // namespace arbor::kernels::cpu

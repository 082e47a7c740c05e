// Hand-built blocks of every type against values written out from the format's
// definition (ggml's block layouts and dequantize_row_* in ggml-quants.c).
#include "kernels/cpu/dequantize.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/cpu/matmul.hpp"

namespace arbor::kernels::cpu {
namespace {

constexpr std::uint16_t kHalf = 0x3800;      // 0.5
constexpr std::uint16_t kQuarter = 0x3400;   // 0.25
constexpr std::uint16_t kMinusOne = 0xBC00;  // -1
constexpr std::uint16_t kOne = 0x3C00;       // 1

TEST(Dequantize, Q4_0) {
  BlockQ4_0 b{};
  b.d = kHalf;
  for (int j = 0; j < 16; ++j) b.qs[j] = std::uint8_t(j | ((15 - j) << 4));
  float y[32];
  dequantize_row(GgmlType::Q4_0, &b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;
    EXPECT_EQ(y[16 + j], (7 - j) * 0.5f) << j;
  }
  EXPECT_EQ(y[0], -4.f);
  EXPECT_EQ(y[16], 3.5f);
}

TEST(Dequantize, Q4_1) {
  BlockQ4_1 blocks[2]{};
  blocks[0].d = kHalf;
  blocks[0].m = kMinusOne;
  for (int j = 0; j < 16; ++j) blocks[0].qs[j] = std::uint8_t(j | ((15 - j) << 4));
  blocks[1].d = kOne;
  blocks[1].m = kHalf;
  std::memset(blocks[1].qs, 0x21, 16);  // low nibble 1, high nibble 2
  float y[64];
  dequantize_row(GgmlType::Q4_1, blocks, y, 64);
  EXPECT_EQ(y[0], -1.f);
  EXPECT_EQ(y[15], 6.5f);     // 15 * 0.5 - 1
  EXPECT_EQ(y[16], 6.5f);     // high nibble of qs[0] = 15
  EXPECT_EQ(y[31], -1.f);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.5f - 1.f);
    EXPECT_EQ(y[16 + j], (15 - j) * 0.5f - 1.f);
    EXPECT_EQ(y[32 + j], 1.5f);
    EXPECT_EQ(y[48 + j], 2.5f);
  }
}

TEST(Dequantize, Q8_0) {
  BlockQ8_0 b{};
  b.d = kQuarter;
  for (int j = 0; j < 32; ++j) b.qs[j] = std::int8_t(j - 16);
  b.qs[31] = -128;
  float y[32];
  dequantize_row(GgmlType::Q8_0, &b, y, 32);
  for (int j = 0; j < 31; ++j) EXPECT_EQ(y[j], (j - 16) * 0.25f);
  EXPECT_EQ(y[31], -32.f);
}

TEST(Dequantize, F16AndBf16AndF32) {
  const std::uint16_t h[5] = {0x3C00, 0xC000, 0x3555, 0x0001, 0x7BFF};
  float y[5];
  dequantize_row(GgmlType::F16, h, y, 5);
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], -2.f);
  EXPECT_EQ(y[2], 0.333251953125f);
  EXPECT_EQ(y[3], 5.9604644775390625e-8f);
  EXPECT_EQ(y[4], 65504.f);
  const std::uint16_t b[3] = {0x3F80, 0xC040, 0x4049};
  dequantize_row(GgmlType::BF16, b, y, 3);
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], -3.f);
  EXPECT_EQ(y[2], 3.140625f);
  const float f[2] = {1.25f, -7.f};
  dequantize_row(GgmlType::F32, f, y, 2);
  EXPECT_EQ(y[0], 1.25f);
  EXPECT_EQ(y[1], -7.f);
}

TEST(Dequantize, Q4_K) {
  const int sc[8] = {1, 2, 3, 4, 17, 33, 5, 63};
  const int mn[8] = {0, 1, 2, 3, 20, 7, 40, 9};
  BlockQ4_K b{};
  b.d = kOne;
  b.dmin = kHalf;
  // 6-bit scales/mins: j < 4 in the low 6 bits of bytes j / j+4; j >= 4 split into a
  // low nibble in byte j+4 (scale low, min high) and 2 high bits on top of bytes j-4 / j.
  for (int j = 0; j < 4; ++j) {
    b.scales[j] = std::uint8_t((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    b.scales[j + 4] = std::uint8_t((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    b.scales[j + 8] = std::uint8_t((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
  }
  for (int i = 0; i < 128; ++i) b.qs[i] = std::uint8_t(i * 7 + 3);
  float y[256];
  dequantize_row(GgmlType::Q4_K, &b, y, 256);
  for (int v = 0; v < 256; ++v) {
    const int sub = v / 32, chunk = v / 64, within = v % 64;
    const std::uint8_t byte = b.qs[chunk * 32 + within % 32];
    const int nib = within < 32 ? (byte & 0xF) : (byte >> 4);
    EXPECT_EQ(y[v], 1.f * sc[sub] * nib - 0.5f * mn[sub]) << v;
  }
  // A few values by hand: value 0 = 1 * 1 * (3 & 15) - 0 = 3; value 32 = 2 * (3 >> 4) - 0.5 = -0.5.
  EXPECT_EQ(y[0], 3.f);
  EXPECT_EQ(y[32], -0.5f);
  // value 255: sub-block 7 (scale 63, min 9), qs[127] = 127*7+3 = 892 & 255 = 124, high nibble 7.
  EXPECT_EQ(y[255], 63.f * 7 - 4.5f);
}

TEST(Dequantize, Q6_K) {
  BlockQ6_K b{};
  b.d = kHalf;
  for (int i = 0; i < 128; ++i) b.ql[i] = std::uint8_t(i * 13 + 5);
  for (int i = 0; i < 64; ++i) b.qh[i] = std::uint8_t(i * 29 + 1);
  for (int i = 0; i < 16; ++i) b.scales[i] = std::int8_t(i * 9 - 70);
  float y[256];
  dequantize_row(GgmlType::Q6_K, &b, y, 256);
  for (int v = 0; v < 256; ++v) {
    // 128-value halves; within one, 4 quarters of 32: quarter k uses ql[l + 32*(k&1)]
    // (low nibble for k < 2), the 2 bits of qh[l] at 2k, and scale 8*half + l/16 + 2k.
    const int half = v / 128, k = (v % 128) / 32, l = v % 32;
    const std::uint8_t ql = b.ql[half * 64 + l + 32 * (k & 1)];
    const int low = k < 2 ? (ql & 0xF) : (ql >> 4);
    const int high = (b.qh[half * 32 + l] >> (2 * k)) & 3;
    const int q = (low | (high << 4)) - 32;
    EXPECT_EQ(y[v], 0.5f * b.scales[half * 8 + l / 16 + 2 * k] * q) << v;
  }
  // value 0: ql[0] = 5 (low 5), qh[0] = 1 (bits 01) -> q = 5 | 16 = 21 - 32 = -11; scale -70.
  EXPECT_EQ(y[0], 0.5f * -70 * -11);
}

TEST(Dequantize, WeightMatrixRow) {
  BlockQ8_0 rows[2]{};
  rows[0].d = kOne;
  rows[1].d = kHalf;
  for (int j = 0; j < 32; ++j) rows[1].qs[j] = std::int8_t(j);
  const WeightMatrix w{GgmlType::Q8_0, rows, 2, 32};
  float y[32];
  dequantize_row(w, 1, y);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], j * 0.5f);
}

}  // namespace
}  // namespace arbor::kernels::cpu

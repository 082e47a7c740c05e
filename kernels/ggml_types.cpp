#include "kernels/ggml_types.hpp"

#include <cstring>

namespace arbor::kernels {

BlockShape block_shape(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return {1, 4};
    case GgmlType::F16: return {1, 2};
    case GgmlType::BF16: return {1, 2};
    case GgmlType::Q4_0: return {32, 18};
    case GgmlType::Q4_1: return {32, 20};
    case GgmlType::Q8_0: return {32, 34};
    case GgmlType::Q4_K: return {256, 144};
    case GgmlType::Q6_K: return {256, 210};
  }
  return {0, 0};
}

bool is_supported(GgmlType type) { return block_shape(type).values != 0; }

const char* type_name(GgmlType type) {
  switch (type) {
    case GgmlType::F32: return "F32";
    case GgmlType::F16: return "F16";
    case GgmlType::BF16: return "BF16";
    case GgmlType::Q4_0: return "Q4_0";
    case GgmlType::Q4_1: return "Q4_1";
    case GgmlType::Q8_0: return "Q8_0";
    case GgmlType::Q4_K: return "Q4_K";
    case GgmlType::Q6_K: return "Q6_K";
  }
  return "unsupported";
}

std::size_t row_bytes(GgmlType type, std::int64_t n) {
  const BlockShape s = block_shape(type);
  if (s.values == 0) return 0;
  return std::size_t(n / s.values) * std::size_t(s.bytes);
}

float fp16_to_fp32_scalar(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1F;
  std::uint32_t mant = h & 0x3FF;
  std::uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf / nan (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    int e = 113;
    while ((mant & 0x400) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (std::uint32_t(e) << 23) | ((mant & 0x3FF) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

std::uint16_t fp32_to_fp16_scalar(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  const std::uint16_t sign = std::uint16_t((x >> 16) & 0x8000);
  const std::uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // inf or nan (quiet the nan, keep top payload bits)
    if (abs == 0x7F800000u) return sign | 0x7C00;
    return std::uint16_t(sign | 0x7E00 | ((abs >> 13) & 0x3FF));
  }
  if (abs >= 0x477FF000u) return sign | 0x7C00;  // rounds to >= 65520: overflow
  if (abs < 0x38800000u) {                       // below 2^-14: subnormal half or zero
    if (abs < 0x33000000u) return sign;          // < 2^-25: rounds to zero
    const std::uint32_t mant = (abs & 0x7FFFFF) | 0x800000;
    const int shift = 126 - int(abs >> 23);  // 14..24 for exponents -25..-15
    std::uint32_t r = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1);
    const std::uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return std::uint16_t(sign | r);
  }
  // Normal: rebias the exponent and round the 13 dropped mantissa bits to nearest even;
  // a carry into the exponent is the correct result.
  std::uint32_t h = ((abs >> 13) - (112u << 10));
  const std::uint32_t rem = abs & 0x1FFF;
  if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) ++h;
  return std::uint16_t(sign | h);
}

std::uint16_t fp32_to_bf16(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return std::uint16_t((x >> 16) | 0x40);  // quiet nan
  x += 0x7FFF + ((x >> 16) & 1);
  return std::uint16_t(x >> 16);
}

}  // namespace arbor::kernels

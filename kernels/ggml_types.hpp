// The tensor element types Arbor reads from GGUF files (ggml's codes and block
// layouts), and portable fp16/bf16 <-> fp32 conversion. Pure data, shared by every
// backend (the CPU kernels, the CUDA kernels, the GGUF reader and writer): no SIMD
// here (kernels/cpu/fp16.hpp has the F16C conversions).
#pragma once

#include <cstddef>
#include <cstdint>

namespace arbor::kernels {

enum class GgmlType : std::uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q8_0 = 8, Q4_K = 12, Q6_K = 14, BF16 = 30,
};

// Values per block and bytes per block; {0, 0} for a code Arbor does not support.
struct BlockShape {
  int values = 0;
  int bytes = 0;
};
BlockShape block_shape(GgmlType type);
bool is_supported(GgmlType type);
const char* type_name(GgmlType type);
// Bytes of one row of `n` values (n must be a multiple of the block size).
std::size_t row_bytes(GgmlType type, std::int64_t n);

// Portable bit-twiddling conversions (also the references for kernels/cpu/fp16.hpp).
float fp16_to_fp32_scalar(std::uint16_t h);
std::uint16_t fp32_to_fp16_scalar(float f);  // round to nearest even
std::uint16_t fp32_to_bf16(float f);         // round to nearest even
inline float bf16_to_fp32(std::uint16_t b) {
  std::uint32_t u = std::uint32_t(b) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

// ggml block layouts (little-endian, packed as in the file).
#pragma pack(push, 1)
struct BlockQ4_0 { std::uint16_t d; std::uint8_t qs[16]; };
struct BlockQ4_1 { std::uint16_t d, m; std::uint8_t qs[16]; };
struct BlockQ8_0 { std::uint16_t d; std::int8_t qs[32]; };
struct BlockQ4_K { std::uint16_t d, dmin; std::uint8_t scales[12]; std::uint8_t qs[128]; };
struct BlockQ6_K { std::uint8_t ql[128]; std::uint8_t qh[64]; std::int8_t scales[16]; std::uint16_t d; };
#pragma pack(pop)
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144 && sizeof(BlockQ6_K) == 210);

}  // namespace arbor::kernels

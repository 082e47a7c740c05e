// Single-value fp16 <-> fp32 conversions with F16C (part of the CPU kernels' baseline
// ISA). kernels/ggml_types.hpp has the portable versions these must agree with.
#pragma once

#include <cstdint>

namespace arbor::kernels::cpu {

float fp16_to_fp32(std::uint16_t h);
std::uint16_t fp32_to_fp16(float f);  // round to nearest even

}  // namespace arbor::kernels::cpu

#include "kernels/cpu/fp16.hpp"

#include <immintrin.h>

namespace arbor::kernels::cpu {

float fp16_to_fp32(std::uint16_t h) { return _cvtsh_ss(h); }

std::uint16_t fp32_to_fp16(float f) {
  return std::uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

}  // namespace arbor::kernels::cpu

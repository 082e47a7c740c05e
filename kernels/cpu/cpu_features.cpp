#include "kernels/cpu/cpu_features.hpp"

#include <cpuid.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>

namespace arbor::kernels::cpu {
namespace {

std::uint64_t read_xcr0() {
  std::uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (std::uint64_t(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = (c >> 27) & 1;
  const bool fma = (c >> 12) & 1;
  const bool f16c = (c >> 29) & 1;
  const bool avx = (c >> 28) & 1;
  if (!osxsave || !avx) return f;
  const std::uint64_t xcr0 = read_xcr0();
  const bool os_avx = (xcr0 & 0x6) == 0x6;            // XMM + YMM state
  const bool os_avx512 = os_avx && (xcr0 & 0xE0) == 0xE0;  // opmask + ZMM state
  if (!os_avx) return f;
  f.fma = fma;
  f.f16c = f16c;
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = (b >> 5) & 1;
  if (os_avx512) {
    f.avx512f = (b >> 16) & 1;
    f.avx512bw = (b >> 30) & 1;
    f.avx512vl = (b >> 31) & 1;
    f.avx512vnni = (c >> 11) & 1;
    __cpuid_count(7, 1, a, b, c, d);
    f.avx512bf16 = (a >> 5) & 1;
  }
  return f;
}

std::atomic<int> g_override{-1};

bool env_disables_avx512() {
  const char* v = std::getenv("ARBOR_NO_AVX512");
  return v != nullptr && v[0] != '\0' && v[0] != '0';
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

bool use_avx512() {
  static const bool automatic = cpu_features().avx512_ok() && !env_disables_avx512();
  const int mode = g_override.load(std::memory_order_relaxed);
  if (mode < 0) return automatic;
  return mode == 1 && cpu_features().avx512_ok();
}

void set_avx512_override(int mode) { g_override.store(mode, std::memory_order_relaxed); }

}  // namespace arbor::kernels::cpu

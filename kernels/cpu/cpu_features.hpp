// Run-time CPU feature detection (cpuid), so one binary picks AVX-512 paths where
// they exist and AVX2 elsewhere. AMX is deliberately never reported or used: it is
// listed on some VMs but faults.
#pragma once

namespace arbor::kernels::cpu {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;
  bool avx512_ok() const { return avx512f && avx512bw && avx512vl && avx512vnni; }
};

const CpuFeatures& cpu_features();  // detected once, cached
// Set ARBOR_NO_AVX512=1 to force the AVX2 paths (tests run both).
bool use_avx512();
// Test hook: -1 = automatic (detection + ARBOR_NO_AVX512), 0 = force AVX2 paths,
// 1 = AVX-512 paths if the CPU has them. Not thread-safe against running kernels.
void set_avx512_override(int mode);

}  // namespace arbor::kernels::cpu

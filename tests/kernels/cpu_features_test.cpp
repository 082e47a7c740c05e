#include "kernels/cpu/cpu_features.hpp"

#include <gtest/gtest.h>

namespace arbor::kernels::cpu {
namespace {

TEST(CpuFeatures, BaselineIsaPresentAndOverrideWorks) {
  const CpuFeatures& f = cpu_features();
  EXPECT_TRUE(f.avx2);  // the build's baseline
  EXPECT_TRUE(f.fma);
  EXPECT_TRUE(f.f16c);
  set_avx512_override(0);
  EXPECT_FALSE(use_avx512());
  set_avx512_override(1);
  EXPECT_EQ(use_avx512(), f.avx512_ok());
  set_avx512_override(-1);
}

}  // namespace
}  // namespace arbor::kernels::cpu

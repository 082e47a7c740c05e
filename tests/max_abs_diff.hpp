// The largest elementwise difference of two float arrays, for comparisons with a
// tolerance. A NaN on either side makes it infinite: std::max(worst, NaN) keeps `worst`,
// so a plain running maximum passes an output full of NaNs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

namespace arbor::testing {

// max over i of |a[i] - b[i]| / (atol + rtol |b[i]|); with atol 1 and rtol 0 the plain
// largest difference.
inline double worst_ratio(std::span<const float> a, std::span<const float> b, double atol = 1, double rtol = 0) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    const double ratio = std::abs(double(a[i]) - b[i]) / (atol + rtol * std::abs(double(b[i])));
    if (std::isnan(ratio)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, ratio);
  }
  return worst;
}

inline float max_abs_diff(std::span<const float> a, std::span<const float> b) { return float(worst_ratio(a, b)); }

}  // namespace arbor::testing

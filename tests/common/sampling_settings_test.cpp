// check_sampling / sampling_errors: the one set of sampling ranges every front end uses.
#include "common/sampling_settings.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace arbor {
namespace {

TEST(SamplingSettings, DefaultsAndTheEndsOfEachRangeAreAccepted) {
  EXPECT_TRUE(check_sampling(SamplingSettings{}));
  EXPECT_TRUE(check_sampling({.max_tokens = 0, .temperature = 0, .top_p = 0, .top_k = 0}));
  EXPECT_TRUE(check_sampling({.max_tokens = sampling_limits::max_tokens_max,
                              .temperature = sampling_limits::temperature_max,
                              .top_p = sampling_limits::top_p_max,
                              .top_k = sampling_limits::top_k_max}));
}

TEST(SamplingSettings, EachOutOfRangeFieldIsNamedWithItsRangeAndValue) {
  const SamplingSettings bad{.max_tokens = 1048577,
                             .temperature = 100.5,
                             .top_p = std::numeric_limits<double>::quiet_NaN(),
                             .top_k = -1};
  const auto errors = sampling_errors(bad);
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0].field, "max_tokens");
  EXPECT_EQ(errors[0].message, "max_tokens must be in 0..1048576 (got 1048577)");
  EXPECT_EQ(errors[1].field, "temperature");
  EXPECT_EQ(errors[1].message, "temperature must be in 0..100 (got 100.5)");
  EXPECT_EQ(errors[2].field, "top_p");  // NaN is out of every range
  EXPECT_EQ(errors[3].field, "top_k");
  EXPECT_EQ(errors[3].message, "top_k must be in 0..1048576 (got -1; 0 = off)");

  const auto first = check_sampling(bad);
  ASSERT_FALSE(first);
  EXPECT_EQ(first.error().code, ErrorCode::invalid_argument);
  EXPECT_EQ(first.error().message, errors[0].message);
  EXPECT_EQ(check_sampling({.top_p = -0.25}).error().message, "top_p must be in 0..1 (got -0.25)");
}

}  // namespace
}  // namespace arbor

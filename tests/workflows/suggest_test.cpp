#include "workflows/suggest.hpp"

#include <gtest/gtest.h>

namespace arbor::workflows {
namespace {

TEST(Suggest, EditDistanceMatchesHandComputedValues) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("temprature", "temperature"), 1u);
  EXPECT_EQ(edit_distance("itme", "item"), 1u);  // transposition
}

TEST(Suggest, ClosestNameOnlyForPlausibleTypos) {
  EXPECT_EQ(closest_name("temprature", {"top_p", "temperature", "seed"}), "temperature");
  EXPECT_EQ(closest_name("zz", {"q", "topic"}), "");
  EXPECT_EQ(did_you_mean("dependson", {"depends_on", "id"}), " (did you mean 'depends_on'?)");
}

}  // namespace
}  // namespace arbor::workflows

// "Did you mean": the closest known name to a misspelt one, by edit distance.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace arbor::workflows {

// Edit distance: insert, delete, substitute, swap two adjacent characters (each 1). O(|a|*|b|).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `name` if it is close enough to be a plausible typo
// (distance <= max(1, |name|/3)); "" otherwise.
std::string closest_name(std::string_view name, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "".
std::string did_you_mean(std::string_view name, const std::vector<std::string>& candidates);

// "a, b, c" (or "none").
std::string join_names(const std::vector<std::string>& names);

}  // namespace arbor::workflows

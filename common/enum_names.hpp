// An enum's names, written once: a table of {name, value} pairs from which to_string,
// the parser and the list of names (help texts, errors) are all made. Used by the
// configuration enums (arbor/config.hpp) and the outcome enums (common/status.hpp).
// The names in a table must be string literals (name_of returns their data()).
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.hpp"

namespace arbor {

template <class Enum, std::size_t N>
using EnumNames = std::array<std::pair<std::string_view, Enum>, N>;

// The name of `value`; "unknown" for a value outside the table.
template <class Enum, std::size_t N>
constexpr const char* name_of(const EnumNames<Enum, N>& table, Enum value) {
  for (const auto& [name, v] : table)
    if (v == value) return name.data();
  return "unknown";
}

template <class Enum, std::size_t N>
std::vector<std::string> names_of(const EnumNames<Enum, N>& table) {
  std::vector<std::string> out;
  for (const auto& [name, value] : table) out.emplace_back(name);
  return out;
}

// "lru, lfu or workflow"
inline std::string choices_text(const std::vector<std::string>& names) {
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return out;
}

// The value named `name` (exact, case-sensitive); else invalid_argument listing the
// names: "must be lru, lfu or workflow (got 'random')" (the caller puts where in front).
template <class Enum, std::size_t N>
Result<Enum> parse_name(const EnumNames<Enum, N>& table, std::string_view name) {
  for (const auto& [n, v] : table)
    if (n == name) return v;
  return fail(ErrorCode::invalid_argument,
              "must be " + choices_text(names_of(table)) + " (got '" + std::string(name.substr(0, 64)) + "')");
}

}  // namespace arbor

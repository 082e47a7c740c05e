// PositionIndex: maps JSON pointers to line:column in the raw workflow text.
// nlohmann::json keeps no source positions, so the loader scans the text once more
// (after it parsed) and records where every value and every member name starts.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>
#include "common/json_pointer.hpp"  // pointer_append, used with the index

namespace arbor::workflows {

struct TextPosition {
  int line = 0;    // 1-based; 0 = unknown
  int column = 0;  // 1-based, counted in UTF-8 code points
};

class PositionIndex {
 public:
  // Indexes `text`, which should be syntactically valid JSON; on malformed input the
  // index is partial (lookups fall back to ancestors), never an error. O(|text|).
  static PositionIndex build(std::string_view text);

  // Where the value at `pointer` starts; falls back to the nearest indexed ancestor.
  TextPosition value(std::string_view pointer) const;
  // Where the member name of `pointer` starts (for "unknown field"); else value().
  TextPosition key(std::string_view pointer) const;
  // Position of the `decoded_offset`-th byte of the string value at `pointer`, walking
  // escapes in the raw text so a template variable is located exactly.
  TextPosition in_string(std::string_view pointer, std::size_t decoded_offset) const;
  // Line:column of a byte offset into the text.
  TextPosition at_offset(std::size_t offset) const;

  // Pointers of object members whose name repeats an earlier one in the same object.
  const std::vector<std::string>& duplicate_keys() const { return duplicate_keys_; }

 private:
  class Scanner;
  std::string text_;
  std::vector<std::size_t> line_starts_;
  std::unordered_map<std::string, std::size_t> value_offset_;
  std::unordered_map<std::string, std::size_t> key_offset_;
  std::vector<std::string> duplicate_keys_;
};

}  // namespace arbor::workflows

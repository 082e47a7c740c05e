// The reference for "the automaton accepts exactly the valid documents": a text is
// accepted iff it is in the generation form's lexical shape (no whitespace outside
// strings, \u escapes only for U+0000..U+001F, numbers without exponent and with at most
// 15 digits, no duplicate keys),
// parses, and validates with ValidateOptions::schema_order. Independent of the byte
// automaton: nlohmann's parser plus the schema validator.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "model/json_schema.hpp"

namespace arbor::model::testing {

// Whitespace only inside strings.
inline bool no_whitespace_outside_strings(std::string_view text) {
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      return false;
    }
  }
  return true;
}

// Every \u escape names a control character (U+0000..U+001F): other code points are
// written as raw UTF-8. Only strings hold backslashes, so the text is scanned flat.
inline bool u_escapes_only_for_controls(std::string_view text) {
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] != '\\') continue;
    if (text[i + 1] == 'u') {
      if (i + 6 > text.size()) return false;
      const std::string hex(text.substr(i + 2, 4));
      if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) return false;
      if (std::stoul(hex, nullptr, 16) > 0x1F) return false;
    }
    ++i;  // skip the escaped character
  }
  return true;
}

// SAX pass: number forms and duplicate keys.
class FormChecker : public nlohmann::json_sax<Json> {
 public:
  bool ok = true;

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t v) override { return digits_ok(v < 0 ? -(v + 1) + 1 : v); }
  bool number_unsigned(number_unsigned_t v) override { return digits_ok(v); }
  bool number_float(number_float_t, const string_t& raw) override {
    if (raw.find_first_of("eE") != std::string::npos) return fail();
    const std::size_t dot = raw.find('.');
    std::string_view int_part(raw);
    if (!int_part.empty() && int_part[0] == '-') int_part.remove_prefix(1);
    int_part = int_part.substr(0, dot == std::string::npos ? std::string::npos : int_part.find('.'));
    const std::size_t frac = dot == std::string::npos ? 0 : raw.size() - dot - 1;
    const std::size_t digits = (int_part == "0" ? 0 : int_part.size()) + frac;
    return digits <= 15 ? true : fail();
  }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    keys_.emplace_back();
    return true;
  }
  bool key(string_t& k) override { return keys_.back().insert(k).second ? true : fail(); }
  bool end_object() override {
    keys_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return fail(); }

 private:
  bool digits_ok(std::uint64_t v) { return v < 1'000'000'000'000'000ull ? true : fail(); }
  bool fail() {
    ok = false;
    return false;
  }
  std::vector<std::set<std::string>> keys_;
};

inline bool in_generation_form(std::string_view text) {
  if (!no_whitespace_outside_strings(text) || !u_escapes_only_for_controls(text)) return false;
  FormChecker checker;
  const bool parsed = Json::sax_parse(text, &checker, nlohmann::detail::input_format_t::json, true, false);
  return parsed && checker.ok;
}

inline bool reference_accepts(const JsonSchema& schema, std::string_view text) {
  if (!in_generation_form(text)) return false;
  const Json value = Json::parse(text, nullptr, false);
  if (value.is_discarded()) return false;
  return schema.is_valid(value, {.schema_order = true});
}

}  // namespace arbor::model::testing

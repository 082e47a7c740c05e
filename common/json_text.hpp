// parse_json_text: the one way Arbor reads JSON text that a user or a client wrote
// (workflow files and texts, HTTP request bodies, the server config, --input lists).
//
// Never throws and never recurses: nlohmann's parser is iterative, and the document is
// built here through its SAX interface, which refuses nesting deeper than
// kMaxJsonDepth before any recursive walk (validation, serialization) can see it.
// Every failure (malformed JSON, invalid UTF-8, a number outside the double range
// such as 1e999, too deep, UTF-16 text, two byte order marks) comes back as a
// JsonTextError saying what is wrong, where, and how to fix it.
#pragma once

#include <cstddef>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace arbor {

// Arrays and objects nested in each other: at most this many levels.
inline constexpr int kMaxJsonDepth = 64;

struct JsonTextError {
  std::size_t offset = 0;  // byte offset of the problem in the text
  int line = 1;            // 1-based
  int column = 1;          // 1-based, in characters (UTF-8 code points)
  std::string message;     // what is wrong and how to fix it (no position)

  // "line L, column C: message"
  std::string describe() const {
    return "line " + std::to_string(line) + ", column " + std::to_string(column) + ": " + message;
  }
};

namespace json_text_detail {

inline std::size_t utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead >= 0xC2 && lead < 0xE0 ? 2 : lead >= 0xE0 && lead < 0xF0 ? 3
                                                   : lead >= 0xF0 && lead < 0xF5 ? 4 : 0;
}

// `s` with every byte that is not part of a valid UTF-8 character written as \xNN,
// so messages quoting client bytes are printable and valid UTF-8.
inline std::string printable(std::string_view s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = utf8_length(c);
    bool ok = n > 0 && i + n <= s.size();
    for (std::size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
      ++i;
    }
  }
  return out;
}

inline JsonTextError at(std::string_view text, std::size_t offset, std::string message) {
  JsonTextError e;
  e.offset = offset < text.size() ? offset : text.size();
  for (std::size_t i = 0; i < e.offset; ++i) {
    if (text[i] == '\n') e.line += 1, e.column = 1;
    else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++e.column;
  }
  e.message = std::move(message);
  return e;
}

// Text that is not UTF-8 JSON at all: UTF-16/32 (with or without a byte order mark),
// or a second UTF-8 byte order mark (the parser skips one).
inline std::optional<std::string> encoding_problem(std::string_view t) {
  auto starts = [&](std::string_view p) { return t.substr(0, p.size()) == p; };
  const std::string fix = "; save the file as UTF-8 (without a byte order mark)";
  if (starts(std::string_view("\xFF\xFE\0\0", 4))) return "the text is UTF-32 little-endian (byte order mark FF FE 00 00)" + fix;
  if (starts(std::string_view("\0\0\xFE\xFF", 4))) return "the text is UTF-32 big-endian (byte order mark 00 00 FE FF)" + fix;
  if (starts("\xFF\xFE")) return "the text is UTF-16 little-endian (byte order mark FF FE), not UTF-8" + fix;
  if (starts("\xFE\xFF")) return "the text is UTF-16 big-endian (byte order mark FE FF), not UTF-8" + fix;
  if (starts("\xEF\xBB\xBF\xEF\xBB\xBF"))
    return "the text starts with two UTF-8 byte order marks (EF BB BF EF BB BF)" + fix;
  if (t.size() >= 2 && t[0] != '\0' && t[1] == '\0') return "the text looks like UTF-16 little-endian (every other byte is 0)" + fix;
  if (t.size() >= 2 && t[0] == '\0' && t[1] != '\0') return "the text looks like UTF-16 big-endian (every other byte is 0)" + fix;
  return std::nullopt;
}

// Byte offset of the bracket that opens level `max_depth + 1`, in text the parser
// accepted up to there (strings are skipped, escapes included).
inline std::size_t too_deep_offset(std::string_view t, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return t.size();
}

// nlohmann's message without its "[json.exception...] parse error at line..: " head,
// with at most the last 40 characters of the token it read quoted.
inline std::string parser_message(const nlohmann::detail::exception& ex, const std::string& token) {
  std::string tail = token.size() > 40 ? "..." + token.substr(token.size() - 40) : token;
  if (ex.id == 406)  // out_of_range.406: the only non-syntax error of the text parser
    return "number " + printable(tail) +
           " is out of range (JSON numbers here must fit a double, at most about 1.8e308 in magnitude); "
           "write a smaller number, or quote it as a string";
  std::string what = ex.what();
  if (auto col = what.find("column "); col != std::string::npos)
    if (auto colon = what.find(": ", col); colon != std::string::npos) what = what.substr(colon + 2);
  if (auto last = what.find("; last read: "); last != std::string::npos) what.resize(last);
  return printable(what) + (token.empty() ? "" : "; last read: '" + printable(tail) + "'");
}

// Builds the document through nlohmann's SAX interface (iteratively), refusing
// containers nested deeper than `max_depth`, and records the first error.
template <class Json>
class BoundedBuilder final : public nlohmann::json_sax<Json> {
 public:
  using typename nlohmann::json_sax<Json>::number_integer_t;
  using typename nlohmann::json_sax<Json>::number_unsigned_t;
  using typename nlohmann::json_sax<Json>::number_float_t;
  using typename nlohmann::json_sax<Json>::string_t;
  using typename nlohmann::json_sax<Json>::binary_t;

  BoundedBuilder(Json& root, int max_depth) : root_(root), max_depth_(max_depth) {}

  bool null() override { return add(nullptr); }
  bool boolean(bool v) override { return add(v); }
  bool number_integer(number_integer_t v) override { return add(v); }
  bool number_unsigned(number_unsigned_t v) override { return add(v); }
  bool number_float(number_float_t v, const string_t&) override { return add(v); }
  bool string(string_t& v) override { return add(std::move(v)); }
  bool binary(binary_t&) override { return false; }  // JSON text has no binary values
  bool start_object(std::size_t) override { return open(Json::value_t::object); }
  bool start_array(std::size_t) override { return open(Json::value_t::array); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    member_ = &(*stack_.back())[k];  // a repeated key keeps the last value, as nlohmann does
    return true;
  }
  bool parse_error(std::size_t position, const std::string& token, const nlohmann::detail::exception& ex) override {
    // `position` counts the bytes read: the token that broke the parse ends there.
    const std::size_t back = ex.id == 406 ? token.size() : 1;  // a number: point at its start
    error_offset = position >= back ? position - back : 0;
    error_message = parser_message(ex, token);
    return false;
  }

  bool too_deep = false;
  std::size_t error_offset = 0;
  std::string error_message;

 private:
  template <class V>
  bool add(V&& v) {
    place(Json(std::forward<V>(v)));
    return true;
  }
  Json* place(Json&& v) {
    if (stack_.empty()) return &(root_ = std::move(v));
    Json& top = *stack_.back();
    if (top.is_array()) {
      auto& items = top.template get_ref<typename Json::array_t&>();
      items.push_back(std::move(v));
      return &items.back();
    }
    *member_ = std::move(v);
    return member_;
  }
  bool open(typename Json::value_t type) {
    if (static_cast<int>(stack_.size()) >= max_depth_) return too_deep = true, false;
    stack_.push_back(place(Json(type)));
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }

  Json& root_;
  int max_depth_;
  std::vector<Json*> stack_;  // the open containers, outermost first
  Json* member_ = nullptr;    // the object member the next value fills
};

}  // namespace json_text_detail

// Parses one JSON document (trailing whitespace only). `Json` is nlohmann::json or
// nlohmann::ordered_json. O(|text|), no recursion; never throws (but bad_alloc).
template <class Json = nlohmann::json>
std::expected<Json, JsonTextError> parse_json_text(std::string_view text, int max_depth = kMaxJsonDepth) {
  namespace d = json_text_detail;
  if (auto problem = d::encoding_problem(text)) return std::unexpected(d::at(text, 0, *problem));
  Json doc;
  d::BoundedBuilder<Json> builder(doc, max_depth);
  if (Json::sax_parse(text.begin(), text.end(), &builder)) return doc;
  if (builder.too_deep)
    return std::unexpected(d::at(text, d::too_deep_offset(text, max_depth),
                                 "arrays and objects are nested more than " + std::to_string(max_depth) +
                                     " levels deep (the limit of every JSON document Arbor reads); flatten the document"));
  return std::unexpected(d::at(text, builder.error_offset, builder.error_message));
}

}  // namespace arbor

#include "workflows/position_index.hpp"

#include <algorithm>
#include <cstring>

#include "model/unicode.hpp"

namespace arbor::workflows {

namespace {

unsigned parse_hex4(std::string_view s, std::size_t at) {
  unsigned v = 0;
  for (std::size_t i = at; i < at + 4 && i < s.size(); ++i) {
    char c = s[i];
    v = v * 16 + unsigned(c >= 'a' ? c - 'a' + 10 : c >= 'A' ? c - 'A' + 10 : c - '0');
  }
  return v;
}

// Decodes one (possibly escaped) character of a JSON string starting at raw[pos]:
// appends its bytes to `out` and returns the raw length consumed.
std::size_t decode_one(std::string_view raw, std::size_t pos, std::string& out) {
  if (raw[pos] != '\\' || pos + 1 >= raw.size()) {
    out += raw[pos];
    return 1;
  }
  char e = raw[pos + 1];
  switch (e) {
    case 'n': out += '\n'; return 2;
    case 't': out += '\t'; return 2;
    case 'r': out += '\r'; return 2;
    case 'b': out += '\b'; return 2;
    case 'f': out += '\f'; return 2;
    case 'u': {
      unsigned cp = parse_hex4(raw, pos + 2);
      if (cp >= 0xD800 && cp < 0xDC00 && pos + 11 < raw.size() && raw[pos + 6] == '\\') {
        unsigned lo = parse_hex4(raw, pos + 8);
        model::unicode::append_utf8(out, 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00));
        return 12;
      }
      model::unicode::append_utf8(out, cp);
      return 6;
    }
    default: out += e; return 2;  // \" \\ \/
  }
}

constexpr int kMaxDepth = 512;

}  // namespace

// Lenient recursive scanner over text that nlohmann already accepted.
class PositionIndex::Scanner {
 public:
  Scanner(PositionIndex& index, std::string_view text) : index_(index), s_(text) {}

  void value(const std::string& pointer, int depth) {
    skip_ws();
    if (pos_ >= s_.size() || depth > kMaxDepth) return;
    index_.value_offset_.emplace(pointer, pos_);
    char c = s_[pos_];
    if (c == '{') object(pointer, depth);
    else if (c == '[') array(pointer, depth);
    else if (c == '"') string();
    else
      while (pos_ < s_.size() && !std::strchr(",]} \t\r\n", s_[pos_])) ++pos_;
  }

 private:
  void object(const std::string& pointer, int depth) {
    ++pos_;
    std::vector<std::string> seen;
    while (skip_ws(), pos_ < s_.size() && s_[pos_] != '}') {
      if (s_[pos_] != '"') return;  // malformed: stop indexing
      std::size_t key_at = pos_;
      std::string key = string();
      std::string child = pointer_append(pointer, key);
      if (std::find(seen.begin(), seen.end(), key) != seen.end())
        index_.duplicate_keys_.push_back(child);
      else
        seen.push_back(key);
      index_.key_offset_[child] = key_at;
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ':') ++pos_;
      index_.value_offset_.erase(child);  // a duplicate's position is the last one's
      value(child, depth + 1);
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') ++pos_;
    }
    ++pos_;
  }

  void array(const std::string& pointer, int depth) {
    ++pos_;
    for (std::size_t i = 0; skip_ws(), pos_ < s_.size() && s_[pos_] != ']'; ++i) {
      std::size_t before = pos_;
      value(pointer_append(pointer, i), depth + 1);
      skip_ws();
      if (pos_ < s_.size() && s_[pos_] == ',') ++pos_;
      if (pos_ == before) return;  // malformed: no progress
    }
    ++pos_;
  }

  std::string string() {
    std::string out;
    ++pos_;  // opening quote
    while (pos_ < s_.size() && s_[pos_] != '"') pos_ += decode_one(s_, pos_, out);
    ++pos_;
    return out;
  }

  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' ||
                                s_[pos_] == '\r'))
      ++pos_;
  }

  PositionIndex& index_;
  std::string_view s_;
  std::size_t pos_ = 0;
};

PositionIndex PositionIndex::build(std::string_view text) {
  PositionIndex index;
  index.text_ = std::string(text);
  index.line_starts_.push_back(0);
  for (std::size_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') index.line_starts_.push_back(i + 1);
  Scanner(index, index.text_).value("", 0);
  return index;
}

TextPosition PositionIndex::at_offset(std::size_t offset) const {
  offset = std::min(offset, text_.size());
  auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
  std::size_t line = std::size_t(it - line_starts_.begin());
  std::size_t start = line_starts_[line - 1];
  int column = 1;
  for (std::size_t i = start; i < offset; ++i)
    if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) ++column;
  return {int(line), column};
}

TextPosition PositionIndex::value(std::string_view pointer) const {
  std::string p(pointer);
  for (;;) {
    if (auto it = value_offset_.find(p); it != value_offset_.end()) return at_offset(it->second);
    if (p.empty()) return {1, 1};
    p.erase(p.rfind('/'));
  }
}

TextPosition PositionIndex::key(std::string_view pointer) const {
  if (auto it = key_offset_.find(std::string(pointer)); it != key_offset_.end())
    return at_offset(it->second);
  return value(pointer);
}

TextPosition PositionIndex::in_string(std::string_view pointer, std::size_t decoded_offset) const {
  auto it = value_offset_.find(std::string(pointer));
  if (it == value_offset_.end() || text_[it->second] != '"') return value(pointer);
  std::size_t pos = it->second + 1;
  std::string decoded;
  while (pos < text_.size() && text_[pos] != '"' && decoded.size() < decoded_offset)
    pos += decode_one(text_, pos, decoded);
  return at_offset(pos);
}

}  // namespace arbor::workflows

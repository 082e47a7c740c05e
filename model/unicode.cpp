#include "model/unicode.hpp"

#include <algorithm>
#include <array>

namespace arbor::model::unicode {

namespace {

std::uint8_t flags_slow(std::uint32_t cp) {
  if (cp > 0x10FFFF) return kOther;
  const CategoryRange* end = kCategoryRanges + kNumCategoryRanges;
  const CategoryRange* it = std::upper_bound(
      kCategoryRanges, end, cp, [](std::uint32_t c, const CategoryRange& r) { return c < r.first; });
  return (it - 1)->flags;  // range 0 starts at 0, so it > begin
}

struct BmpTable {
  std::array<std::uint8_t, 0x10000> flags{};
  BmpTable() {
    for (std::uint32_t cp = 0; cp < 0x10000; ++cp) flags[cp] = flags_slow(cp);
  }
};

struct ByteMap {
  std::array<std::string, 256> to_utf8;
  std::array<std::int16_t, 512> from_cp;  // all mapped code points are < 512
  ByteMap() {
    from_cp.fill(-1);
    // Printable Latin-1 bytes map to themselves; the rest to 256, 257, ... in order.
    auto printable = [](int b) {
      return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      const std::uint32_t cp = printable(b) ? std::uint32_t(b) : std::uint32_t(next++);
      append_utf8(to_utf8[b], cp);
      from_cp[cp] = std::int16_t(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

}  // namespace

std::uint8_t flags(std::uint32_t cp) {
  static const BmpTable table;
  return cp < 0x10000 ? table.flags[cp] : flags_slow(cp);
}

int utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  return 1;
}

Utf8Head utf8_head(std::string_view text) {
  if (text.empty()) return {};
  const auto lead = static_cast<unsigned char>(text[0]);
  if (lead < 0x80) return {1, 1};
  // Table 3-7: the lead byte fixes the length and the range of the second byte.
  int needed = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    needed = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    needed = 3;
    if (lead == 0xE0) lo = 0xA0;  // below: overlong
    if (lead == 0xED) hi = 0x9F;  // above: surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    needed = 4;
    if (lead == 0xF0) lo = 0x90;  // below: overlong
    if (lead == 0xF4) hi = 0x8F;  // above: past U+10FFFF
  } else {
    return {};  // a continuation byte, C0, C1 or F5..FF
  }
  int valid = 1;
  while (valid < needed && std::size_t(valid) < text.size()) {
    const auto c = static_cast<unsigned char>(text[std::size_t(valid)]);
    if (c < lo || c > hi) break;
    lo = 0x80, hi = 0xBF;
    ++valid;
  }
  return {needed, valid};
}

bool is_valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Head h = utf8_head(text.substr(i));
    if (h.needed == 0 || h.valid < h.needed) return false;
    i += std::size_t(h.needed);
  }
  return true;
}

std::size_t utf8_incomplete_tail(std::string_view text) {
  // Walk back over continuation bytes to the last byte that could begin a character.
  for (std::size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const auto c = static_cast<unsigned char>(text[text.size() - back]);
    if ((c & 0xC0) == 0x80) continue;
    const Utf8Head h = utf8_head(text.substr(text.size() - back));
    return std::size_t(h.valid) == back && h.needed > h.valid ? back : 0;
  }
  return 0;
}

std::string to_valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const Utf8Head h = utf8_head(text.substr(i));
    if (h.needed > 0 && h.valid == h.needed) {
      out.append(text.substr(i, std::size_t(h.needed)));
      i += std::size_t(h.needed);
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for the maximal subpart (at least one byte)
      i += std::size_t(std::max(h.valid, 1));
    }
  }
  return out;
}

std::vector<CodeUnit> decode_utf8(std::string_view text) {
  std::vector<CodeUnit> out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const Utf8Head h = utf8_head(text.substr(i));
    if (h.needed == 0 || h.valid < h.needed) {
      out.push_back({0xFFFD, std::uint32_t(i), 1});  // one unit per invalid byte
      i += 1;
      continue;
    }
    const auto lead = static_cast<unsigned char>(text[i]);
    std::uint32_t cp = h.needed == 1 ? lead : lead & (0x7Fu >> h.needed);
    for (int k = 1; k < h.needed; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + std::size_t(k)]) & 0x3F);
    out.push_back({cp, std::uint32_t(i), std::uint32_t(h.needed)});
    i += std::size_t(h.needed);
  }
  return out;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

const std::string& byte_to_unicode_utf8(std::uint8_t b) { return byte_map().to_utf8[b]; }

int unicode_to_byte(std::uint32_t cp) { return cp < 512 ? byte_map().from_cp[cp] : -1; }

}  // namespace arbor::model::unicode

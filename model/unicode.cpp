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

std::vector<CodeUnit> decode_utf8(std::string_view text) {
  std::vector<CodeUnit> out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    const int len = utf8_sequence_length(lead);
    bool ok = (len == 1) ? lead < 0x80 : i + len <= text.size();
    std::uint32_t cp = 0;
    if (ok && len > 1) {
      cp = lead & (0x7F >> len);
      for (int k = 1; k < len && ok; ++k) {
        const auto c = static_cast<unsigned char>(text[i + k]);
        ok = (c & 0xC0) == 0x80;
        cp = (cp << 6) | (c & 0x3F);
      }
      // Reject overlong forms, surrogates and values past U+10FFFF.
      static constexpr std::uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
      ok = ok && cp >= kMin[len] && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    } else if (ok) {
      cp = lead;
    }
    if (ok) {
      out.push_back({cp, std::uint32_t(i), std::uint32_t(len)});
      i += len;
    } else {
      out.push_back({0xFFFD, std::uint32_t(i), 1});
      i += 1;
    }
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

// Unicode helpers for the tokenizers: UTF-8 decoding that never loses bytes, general
// category flags (from the generated model/unicode_tables.cpp), and GPT-2's
// byte <-> printable-code-point mapping used by byte-level BPE vocabularies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace arbor::model::unicode {

// Category flag bits; tools/gen_unicode_tables.py writes the same values.
enum Flag : std::uint8_t {
  kLetter = 1 << 0,       // \p{L}
  kNumber = 1 << 1,       // \p{N}
  kPunctuation = 1 << 2,  // \p{P}
  kSymbol = 1 << 3,       // \p{S}
  kMark = 1 << 4,         // \p{M}
  kSeparator = 1 << 5,    // \p{Z}
  kOther = 1 << 6,        // \p{C}
  kWhitespace = 1 << 7,   // \s (the White_Space property)
};

struct CategoryRange {
  std::uint32_t first, last;
  std::uint8_t flags;
};
extern const CategoryRange kCategoryRanges[];
extern const std::size_t kNumCategoryRanges;

// Flags of a code point; code points above 0x10FFFF get kOther. O(1) below 0x10000
// (a table built on first use, thread-safe), O(log n) above.
std::uint8_t flags(std::uint32_t cp);

// One decoded unit of a UTF-8 string. An invalid or truncated sequence yields one unit
// per byte with cp = 0xFFFD (so flags are those of U+FFFD, a symbol) and num_bytes = 1:
// the original bytes are always recoverable from (offset, num_bytes).
struct CodeUnit {
  std::uint32_t cp;
  std::uint32_t offset;
  std::uint32_t num_bytes;
};
std::vector<CodeUnit> decode_utf8(std::string_view text);

void append_utf8(std::string& out, std::uint32_t cp);

// Length of the UTF-8 sequence a lead byte announces (1 for invalid lead bytes).
int utf8_sequence_length(unsigned char lead);

// GPT-2's reversible mapping of the 256 byte values to printable code points
// (e.g. 0x20 -> U+0120 'Ġ'). byte_to_unicode_utf8(b) is the UTF-8 form of that code
// point; unicode_to_byte returns -1 for a code point outside the mapping.
const std::string& byte_to_unicode_utf8(std::uint8_t b);
int unicode_to_byte(std::uint32_t cp);

}  // namespace arbor::model::unicode

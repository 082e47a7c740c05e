// Unicode helpers for the tokenizers and generated text: UTF-8 decoding that never loses
// bytes, UTF-8 validation and U+FFFD substitution, general category flags (from the
// generated model/unicode_tables.cpp), and GPT-2's byte <-> printable-code-point mapping
// used by byte-level BPE vocabularies.
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

// Appends the UTF-8 encoding of `cp` (a scalar value) to `out`.
void append_utf8(std::string& out, std::uint32_t cp);

// Length of the UTF-8 sequence a lead byte announces (1 for invalid lead bytes).
int utf8_sequence_length(unsigned char lead);

// --- Well-formed UTF-8 (Unicode 15, Table 3-7: no overlong forms, no surrogates, nothing
// past U+10FFFF). The one validator of generated text: decode_utf8 above, the stop
// checker's streaming hold-back (model/sampler_stop) and every sanitizer use it.

// The character that begins at text[0], as far as `text` holds it: `needed` bytes make
// it whole (0: text[0] begins no character, e.g. a continuation byte, C0, F5..FF) and
// the first `valid` of them are present and well-formed (valid == needed: complete).
struct Utf8Head {
  int needed = 0;
  int valid = 0;
};
Utf8Head utf8_head(std::string_view text);

bool is_valid_utf8(std::string_view text);

// Bytes at the end of `text` (0..3) that begin a character without finishing it: what a
// stream holds back until the next bytes complete it. Invalid bytes are not held back.
std::size_t utf8_incomplete_tail(std::string_view text);

// `text` with each ill-formed subsequence (a maximal subpart, Unicode's recommended
// practice for U+FFFD substitution) replaced by U+FFFD, an unfinished character at the
// end included. Valid text comes back unchanged. For any split a + b where `a` has no
// incomplete tail, to_valid_utf8(a) + to_valid_utf8(b) == to_valid_utf8(a + b), so a
// stream's chunks concatenate to its final text.
std::string to_valid_utf8(std::string_view text);

// GPT-2's reversible mapping of the 256 byte values to printable code points
// (e.g. 0x20 -> U+0120 'Ġ'). byte_to_unicode_utf8(b) is the UTF-8 form of that code
// point; unicode_to_byte returns -1 for a code point outside the mapping.
const std::string& byte_to_unicode_utf8(std::uint8_t b);
int unicode_to_byte(std::uint32_t cp);

}  // namespace arbor::model::unicode

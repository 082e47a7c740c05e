// Frame layouts and helpers shared by the grammar's builder and its matcher. Internal
// to model/json_grammar*.cpp.
#pragma once

#include <cstdint>

#include "model/json_grammar.hpp"

namespace arbor::model::grammar_detail {

// Numbers: a = phase | negative | int digits << 4 | fraction digits << 8 | zero int;
// b, c = the digits typed so far (int then fraction, a lone leading 0 excluded) as one
// integer, low and high words.
enum : std::uint32_t { kNumStart = 0, kNumMinus, kNumZero, kNumInt, kNumDot, kNumFrac };
inline constexpr std::uint32_t kNumNegative = 1u << 3;
inline constexpr std::uint32_t kNumZeroInt = 1u << 12;
inline constexpr int kMaxNumberDigits = 15;

// Strings: a = character DFA state, b = lexer state, c = code point count, d = opened.
// Objects: a = phase | pending | slot << 8 (next declared property that may come);
// b = set of additional keys written; c = key DFA state, then the chosen property;
// d = key lexer state.
enum : std::uint32_t { kObjStart = 0, kObjAfterOpen, kObjKey, kObjColon, kObjValue, kObjAfterValue, kObjAfterComma };
inline constexpr std::uint32_t kObjPending = 1u << 4;  // an additional key ended in this token
inline constexpr std::int32_t kAdditionalKeyLabel = 0x7FFFFFFF;

// Arrays: a = phase | item count << 3.
enum : std::uint32_t { kArrStart = 0, kArrAfterOpen, kArrAfterValue, kArrAfterComma };

bool string_live(const StringSpec& spec, std::uint32_t state, std::uint32_t count);

// The key automaton of an object at `slot`: labels are property indexes, or
// kAdditionalKeyLabel for a key no property declares; `written` keys are excluded.
CharDfa make_key_dfa(const ObjectSpec& object, std::size_t slot, const std::vector<std::string>& written);

inline constexpr std::uint32_t kLexNormalState = 0;  // between code points

// One byte inside a string frame (after its opening quote): a = DFA state, b = lexer
// state, c = count, updated in place unless the byte is not allowed.
enum class StringStep { dead, ok, closed };
StringStep string_byte(const StringSpec& spec, std::uint32_t& state, std::uint32_t& lex, std::uint32_t& count,
                       std::uint8_t byte);
// The same over a DFA without length limits.
StringStep string_byte_unbounded(const CharDfa& dfa, std::uint32_t& state, std::uint32_t& lex, std::uint8_t byte);
// The lexer is between code points (not inside an escape or a UTF-8 sequence).
inline bool lexer_at_boundary(std::uint32_t lex) { return (lex & 15) == 0; }
// Some completion of the number typed so far lies within the bounds.
bool number_live(const NumberSpec& spec, std::uint32_t a, std::uint64_t digits);
// The number typed so far lies within the bounds.
bool number_value_in_range(const NumberSpec& spec, std::uint32_t a, std::uint64_t digits);
// Consumes one byte of a number frame; false when it is not allowed or leads nowhere.
bool number_transition(const NumberSpec& spec, Frame& frame, std::uint8_t byte);

}  // namespace arbor::model::grammar_detail

// The built-in `calculator` tool's evaluator: a safe arithmetic expression parser
// (recursive descent over the text; nothing is executed but arithmetic).
//
//   expr    := term (('+' | '-') term)*
//   term    := unary (('*' | '/' | '%') unary)*
//   unary   := ('-' | '+') unary | power
//   power   := primary ('^' unary)?          right-associative: 2^3^2 = 2^9; -2^2 = -4
//   primary := number | '(' expr ')'
//   number  := digits ['.' digits] | '.' digits
//
// Doubles throughout; '%' is fmod (the sign of the dividend). Errors (never a crash,
// never undefined behaviour): an unexpected character or end, division or modulo by
// zero, a result that is not a finite number, an expression longer than
// kMaxExpressionBytes or nested deeper than kMaxExpressionDepth. Each error says what
// and at which character (1-based column).
#pragma once

#include <cstddef>
#include <expected>
#include <string>
#include <string_view>

namespace arbor::workflows {

inline constexpr std::size_t kMaxExpressionBytes = 1000;
inline constexpr int kMaxExpressionDepth = 64;

std::expected<double, std::string> evaluate_expression(std::string_view text);

// The value as the tool reports it: integers without a decimal point ("12"), others
// in the shortest form that reads back the same double ("0.1", "3.3333333333333335").
std::string format_number(double value);

}  // namespace arbor::workflows

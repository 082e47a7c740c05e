#include "workflows/calculator.hpp"

#include <charconv>
#include <cmath>

namespace arbor::workflows {
namespace {

using Value = std::expected<double, std::string>;

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  Value parse() {
    auto v = expr();
    if (!v) return v;
    skip_space();
    if (pos_ < text_.size()) return error(std::string("unexpected '") + text_[pos_] + "'");
    return v;
  }

 private:
  std::unexpected<std::string> error(const std::string& what) const {
    return std::unexpected(what + " at column " + std::to_string(pos_ + 1));
  }

  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n')) ++pos_;
  }

  bool eat(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  // Every finite intermediate stays finite: an overflow is an error where it happens.
  Value checked(double v, const char* op) const {
    if (!std::isfinite(v)) return error(std::string("the result of '") + op + "' is not a finite number");
    return v;
  }

  Value expr() {
    auto left = term();
    while (left) {
      if (eat('+')) {
        auto right = term();
        if (!right) return right;
        left = checked(*left + *right, "+");
      } else if (eat('-')) {
        auto right = term();
        if (!right) return right;
        left = checked(*left - *right, "-");
      } else {
        break;
      }
    }
    return left;
  }

  Value term() {
    auto left = unary();
    while (left) {
      char op = 0;
      for (char c : {'*', '/', '%'})
        if (!op && eat(c)) op = c;
      if (!op) break;
      skip_space();
      const std::size_t at = pos_;  // the divisor, for "division by zero at column N"
      auto right = unary();
      if (!right) return right;
      if (op == '*') {
        left = checked(*left * *right, "*");
      } else if (*right == 0) {
        pos_ = at;
        return error(op == '/' ? "division by zero" : "modulo by zero");
      } else {
        left = checked(op == '/' ? *left / *right : std::fmod(*left, *right), op == '/' ? "/" : "%");
      }
    }
    return left;
  }

  Value unary() {
    if (++depth_ > kMaxExpressionDepth) return error("nested deeper than " + std::to_string(kMaxExpressionDepth) + " levels");
    Value v;
    if (eat('-')) {
      v = unary();
      if (v) v = -*v;
    } else if (eat('+')) {
      v = unary();
    } else {
      v = power();
    }
    --depth_;
    return v;
  }

  Value power() {
    auto base = primary();
    if (!base || !eat('^')) return base;
    auto exponent = unary();
    if (!exponent) return exponent;
    return checked(std::pow(*base, *exponent), "^");
  }

  Value primary() {
    skip_space();
    if (pos_ >= text_.size()) return error("expected a number or '(' but the expression ended");
    if (eat('(')) {
      auto v = expr();
      if (!v) return v;
      if (!eat(')')) return error(pos_ < text_.size() ? std::string("expected ')' but found '") + text_[pos_] + "'"
                                                      : std::string("expected ')' but the expression ended"));
      return v;
    }
    return number();
  }

  Value number() {
    const std::size_t start = pos_;
    auto digits = [&] {
      std::size_t n = 0;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_, ++n;
      return n;
    };
    std::size_t n = digits();
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      const std::size_t fraction = digits();
      if (fraction == 0) return error("expected a digit after '.'");
      n += fraction;
    }
    if (n == 0) return error(std::string("expected a number or '(' but found '") + text_[start] + "'");
    double v = 0;
    const auto r = std::from_chars(text_.data() + start, text_.data() + pos_, v);
    if (r.ec != std::errc() || !std::isfinite(v)) {
      pos_ = start;
      return error("number too large");
    }
    return v;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

std::expected<double, std::string> evaluate_expression(std::string_view text) {
  if (text.size() > kMaxExpressionBytes)
    return std::unexpected("expression longer than " + std::to_string(kMaxExpressionBytes) + " bytes");
  auto v = Parser(text).parse();
  if (v && *v == 0) v = 0.0;  // no "-0"
  return v;
}

std::string format_number(double value) {
  if (std::trunc(value) == value && std::fabs(value) < 1e15) {
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, static_cast<long long>(value));
    return std::string(buf, r.ptr);
  }
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, value);
  return std::string(buf, r.ptr);
}

}  // namespace arbor::workflows

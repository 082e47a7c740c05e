// The calculator tool's evaluator against hand-computed values, and its errors: every
// bad input is a message with the column, never a crash (deep or huge input included).
#include "workflows/calculator.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace arbor::workflows {
namespace {

double value(const std::string& text) {
  auto v = evaluate_expression(text);
  EXPECT_TRUE(v.has_value()) << text << ": " << (v ? "" : v.error());
  return v.value_or(-12345.678);
}

std::string error(const std::string& text) {
  auto v = evaluate_expression(text);
  EXPECT_FALSE(v.has_value()) << text << " gave " << v.value_or(0);
  return v ? "" : v.error();
}

TEST(Calculator, FollowsPrecedenceAndAssociativity) {
  EXPECT_EQ(value("2+3*4"), 14);
  EXPECT_EQ(value("(2+3)*4"), 20);
  EXPECT_EQ(value("10-4-3"), 3);           // left-associative
  EXPECT_EQ(value("100/10/5"), 2);
  EXPECT_EQ(value("2^3^2"), 512);          // right-associative: 2^9
  EXPECT_EQ(value("-2^2"), -4);            // power binds tighter than unary minus
  EXPECT_EQ(value("2^-1"), 0.5);
  EXPECT_EQ(value("--3"), 3);
  EXPECT_EQ(value("+4 - -1"), 5);
  EXPECT_EQ(value("7/2"), 3.5);
  EXPECT_EQ(value("10 % 3"), 1);
  EXPECT_EQ(value("-7 % 3"), -1);          // the sign of the dividend
  EXPECT_EQ(value("5.5 % 2"), 1.5);
  EXPECT_EQ(value("1.5 * 4"), 6);
  EXPECT_EQ(value(".5 + .25"), 0.75);
  EXPECT_EQ(value(" ( 1 + ( 2 * ( 3 + 4 ) ) ) "), 15);
  EXPECT_EQ(value("12 * 7"), 84);
  EXPECT_EQ(value("0 * -1"), 0);
  EXPECT_FALSE(std::signbit(value("0 * -1")));  // "0", not "-0"
}

TEST(Calculator, FormatsIntegersPlainlyAndOthersShortest) {
  EXPECT_EQ(format_number(84), "84");
  EXPECT_EQ(format_number(-4), "-4");
  EXPECT_EQ(format_number(3.5), "3.5");
  EXPECT_EQ(format_number(value("0.1+0.2")), "0.30000000000000004");
  EXPECT_EQ(format_number(value("1/3")), "0.3333333333333333");
  EXPECT_EQ(format_number(1e20), "1e+20");
}

TEST(Calculator, NamesWhatIsWrongAndWhere) {
  EXPECT_EQ(error("1/0"), "division by zero at column 3");
  EXPECT_EQ(error("5 % (2-2)"), "modulo by zero at column 5");
  EXPECT_EQ(error("2 +"), "expected a number or '(' but the expression ended at column 4");
  EXPECT_EQ(error("2 $ 3"), "unexpected '$' at column 3");
  EXPECT_EQ(error("(1+2"), "expected ')' but the expression ended at column 5");
  EXPECT_EQ(error("1."), "expected a digit after '.' at column 3");
  EXPECT_EQ(error("abs(2)"), "expected a number or '(' but found 'a' at column 1");
  EXPECT_EQ(error(""), "expected a number or '(' but the expression ended at column 1");
}

TEST(Calculator, RefusesHugeDeepAndNonFiniteInput) {
  EXPECT_NE(error("10^400").find("the result of '^' is not a finite number"), std::string::npos);
  EXPECT_NE(error("(-8)^0.5").find("not a finite number"), std::string::npos);
  EXPECT_NE(error(std::string(400, '9')).find("number too large at column 1"), std::string::npos);
  EXPECT_NE(error(std::string(100, '(') + "1" + std::string(100, ')')).find("nested deeper than 64 levels"),
            std::string::npos);
  EXPECT_NE(error(std::string(5000, '-') + "1").find("longer than 1000 bytes"), std::string::npos);
  EXPECT_NE(error(std::string(900, '-') + "1").find("nested deeper"), std::string::npos);
  std::string sum = "1";
  for (int i = 0; i < 300; ++i) sum += "+1";  // long but flat: fine
  EXPECT_EQ(value(sum), 301);
}

}  // namespace
}  // namespace arbor::workflows

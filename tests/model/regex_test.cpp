// JSON Schema patterns -> code point DFA, against std::regex (ECMAScript, search
// semantics) on random ASCII strings, plus code point cases and rejected constructs.
#include "model/regex.hpp"

#include <gtest/gtest.h>

#include <regex>

#include "model/sampler.hpp"

namespace arbor::model {
namespace {

bool dfa_search(const CharDfa& d, std::string_view s) { return d.match(s) != CharDfa::kReject; }

TEST(Regex, AgreesWithStdRegexOnAsciiStrings) {
  const std::vector<std::string> patterns = {
      "^[a-z]+$", "a|b", "^(ab)*c?$", "x{2,3}", "^\\d{2,4}-\\w+$", "[^a-c]", "^.$", "colou?r",
      "^(a|ab)(c|bcd)$", "\\s", "^[\\w.-]+@[a-z]+\\.(com|org)$", "(?:ab){2}", "^a{0,2}b{1,}$", "[a\\-z]", "^$",
      "b+?", "\\.", "^[0-9]*\\.[0-9]+$", "[\\d\\s]+", "\\x41", "\\u0041", "^\\W*$",
      "^a|b$", "(a|b)*abb", "^[^\\n]*$", "^\\t", "a{2}", "^(x|y|)$", "[.]", "^[-a]$", "^\\S+$",
      "^(?:[a-c]{1,2}|9)+$", "cc*c", "^[\\^x]$"};
  const std::string alphabet = "abcrxyzuAB019 -_.@\n\t^{},";
  SamplerRng rng(7);
  for (const auto& p : patterns) {
    SCOPED_TRACE(p);
    auto dfa = compile_pattern(p);
    ASSERT_TRUE(dfa) << dfa.error().message;
    const std::regex re(p, std::regex::ECMAScript);
    for (int i = 0; i < 400; ++i) {
      std::string s;
      for (int n = int(rng.next() % 8); n > 0; --n) s += alphabet[rng.next() % alphabet.size()];
      EXPECT_EQ(dfa_search(*dfa, s), std::regex_search(s, re)) << "'" << s << "'";
    }
  }
}

TEST(Regex, MatchesCodePoints) {
  auto dot = compile_pattern("^.$");
  ASSERT_TRUE(dot);
  for (const char* s : {"a", "é", "€", "😀"}) EXPECT_TRUE(dfa_search(*dot, s)) << s;
  for (const char* s : {"", "ab", "\n", "é!"}) EXPECT_FALSE(dfa_search(*dot, s)) << s;
  auto range = compile_pattern("^[à-ÿ]+$");
  ASSERT_TRUE(range);
  EXPECT_TRUE(dfa_search(*range, "éü"));
  EXPECT_FALSE(dfa_search(*range, "e"));
  auto pair = compile_pattern("^\\uD83D\\uDE00$");  // a surrogate pair names one code point
  ASSERT_TRUE(pair);
  EXPECT_TRUE(dfa_search(*pair, "😀"));
  auto named = compile_pattern("^(?<year>\\d{4})-\\d\\d$");  // std::regex lacks named groups
  ASSERT_TRUE(named);
  EXPECT_TRUE(dfa_search(*named, "2024-06"));
  EXPECT_FALSE(dfa_search(*named, "24-06"));
  // Annex B: braces that do not form a quantifier are literals (std::regex rejects them).
  auto literal_braces = compile_pattern("^a{,2}z{1$");
  ASSERT_TRUE(literal_braces);
  EXPECT_TRUE(dfa_search(*literal_braces, "a{,2}z{1"));
  EXPECT_FALSE(dfa_search(*literal_braces, "aa"));
  auto braces = compile_pattern("^\\u{1F600}x$");
  ASSERT_TRUE(braces);
  EXPECT_TRUE(dfa_search(*braces, "😀x"));
}

TEST(Regex, RejectsWhatItCannotCompile) {
  for (const char* p : {"\\bword", "(?=a)", "(?!a)", "(?<=a)b", "(a)\\1", "\\p{L}", "a^b", "a$b", "*a", "a**",
                        "(ab", "ab)", "[ab", "x{3,2}", "a{1001}", "(?i)a"}) {
    auto dfa = compile_pattern(p);
    EXPECT_FALSE(dfa) << p;
    if (!dfa) {
      EXPECT_NE(dfa.error().message.find("offset"), std::string::npos) << dfa.error().message;
    }
  }
}

}  // namespace
}  // namespace arbor::model

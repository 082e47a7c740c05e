// The UTF-8 helpers of model/unicode.hpp that make generated text valid: validation per
// Unicode's Table 3-7, the streaming hold-back of an unfinished character, and U+FFFD
// substitution of maximal subparts (the examples are Unicode 15, Tables 3-8 to 3-11).
#include "model/unicode.hpp"

#include <gtest/gtest.h>

#include <random>

namespace arbor::model::unicode {
namespace {

const std::string kFffd = "\xEF\xBF\xBD";

std::string repeat_fffd(int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += kFffd;
  return s;
}

TEST(Utf8, ValidTextPassesUnchanged) {
  const std::vector<std::string> valid = {
      "", "plain ascii", "\xC3\xA4", "\xE2\x82\xAC", "\xF0\x9F\x99\x82", "\xEF\xBF\xBF", "\xF4\x8F\xBF\xBF",
      "\xED\x9F\xBF", "\xEE\x80\x80", std::string("nul\0byte", 8)};
  for (const std::string& s : valid) {
    EXPECT_TRUE(is_valid_utf8(s)) << s;
    EXPECT_EQ(to_valid_utf8(s), s);
    EXPECT_EQ(utf8_incomplete_tail(s), 0u);
  }
}

TEST(Utf8, RejectsOverlongSurrogatesAndOutOfRange) {
  for (const std::string s : {"\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF", "\xF0\x80\x80\x80",
                              "\xF0\x8F\xBF\xBF", "\xED\xA0\x80", "\xED\xBF\xBF", "\xF4\x90\x80\x80",
                              "\xF5\x80\x80\x80", "\xFF", "\xFE", "\x80", "\xBF"}) {
    EXPECT_FALSE(is_valid_utf8(s)) << testing::PrintToString(s);
    EXPECT_TRUE(is_valid_utf8(to_valid_utf8(s)));
    EXPECT_NE(to_valid_utf8(s).find(kFffd), std::string::npos);
  }
}

TEST(Utf8, ReplacesEachMaximalSubpartOnce) {
  // Table 3-8: a truncated sequence is one U+FFFD, a stray continuation byte is one each.
  EXPECT_EQ(to_valid_utf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + repeat_fffd(3) + "b" + kFffd + "c" + repeat_fffd(2) + "d");
  // Tables 3-9 and 3-10: overlong forms and surrogates are never a prefix: one per byte.
  EXPECT_EQ(to_valid_utf8("\xC0\xAF\xE0\x80\xBF\xF0\x81\x82\x41"), repeat_fffd(8) + "A");
  EXPECT_EQ(to_valid_utf8("\xED\xA0\x80\xED\xBF\xBF\xED\xAF\x41"), repeat_fffd(8) + "A");
  // Table 3-11: past U+10FFFF, and bytes that never occur.
  EXPECT_EQ(to_valid_utf8("\xF4\x91\x92\x93\xFF\x41\x80\xBF\x42"), repeat_fffd(5) + "A" + repeat_fffd(2) + "B");
  EXPECT_EQ(to_valid_utf8("\xE1\x80\xE2\xF0\x91\x92\xF1\xBF\x41"), repeat_fffd(4) + "A");
}

TEST(Utf8, IncompleteTailIsOnlyAPrefixOfAValidCharacter) {
  EXPECT_EQ(utf8_incomplete_tail("ab\xC3"), 1u);
  EXPECT_EQ(utf8_incomplete_tail("ab\xE2\x82"), 2u);
  EXPECT_EQ(utf8_incomplete_tail("\xF0\x9F\x99"), 3u);
  EXPECT_EQ(utf8_incomplete_tail("\xF0\x9F"), 2u);
  EXPECT_EQ(utf8_incomplete_tail("\xF0\x9F\x99\x82"), 0u);  // complete
  EXPECT_EQ(utf8_incomplete_tail("\xE0\x80"), 0u);          // overlong: can never complete
  EXPECT_EQ(utf8_incomplete_tail("\xED\xA0"), 0u);          // a surrogate: never
  EXPECT_EQ(utf8_incomplete_tail("\xF4\x90"), 0u);          // past U+10FFFF: never
  EXPECT_EQ(utf8_incomplete_tail("\xC0"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("\xFF"), 0u);
  EXPECT_EQ(utf8_incomplete_tail("a\x80\x80"), 0u);  // stray continuation bytes
  EXPECT_EQ(utf8_incomplete_tail("\xF0\x80\x80\x80"), 0u);
  EXPECT_EQ(to_valid_utf8("ab\xE2\x82"), "ab" + kFffd);  // one U+FFFD for the unfinished character
}

TEST(Utf8, DecodeAgreesWithTheValidator) {
  const auto units = decode_utf8("a\xE2\x82\xAC\xED\xA0\x80\xF0\x9F\x99\x82\xC3");
  std::vector<std::uint32_t> cps;
  for (const auto& u : units) cps.push_back(u.cp);
  EXPECT_EQ(cps, (std::vector<std::uint32_t>{'a', 0x20AC, 0xFFFD, 0xFFFD, 0xFFFD, 0x1F642, 0xFFFD}));
}

// Streaming: holding back each chunk's incomplete tail, the sanitized chunks are each
// valid and concatenate to the sanitized whole, for any bytes and any split.
TEST(Utf8, ChunksHeldBackAtIncompleteTailsConcatenateToTheWhole) {
  std::mt19937 rng(7);
  const std::vector<std::string> alphabet = {"a", "\xC3", "\xA4", "\xE2", "\x82", "\xAC", "\xF0", "\x9F", "\x99",
                                             "\x82", "\xED", "\xA0", "\xE0", "\xF4", "\x90", "\xFF", "\xC0", "\x80"};
  for (int round = 0; round < 2000; ++round) {
    std::string all;
    std::string streamed;
    std::size_t emitted = 0;
    const int pieces = 1 + int(rng() % 12);
    for (int p = 0; p < pieces; ++p) {
      const int n = 1 + int(rng() % 4);
      for (int k = 0; k < n; ++k) all += alphabet[rng() % alphabet.size()];
      const std::size_t end = all.size() - utf8_incomplete_tail(all);
      const std::string chunk = to_valid_utf8(std::string_view(all).substr(emitted, end - emitted));
      ASSERT_TRUE(is_valid_utf8(chunk));
      streamed += chunk;
      emitted = end;
    }
    streamed += to_valid_utf8(std::string_view(all).substr(emitted));
    ASSERT_EQ(streamed, to_valid_utf8(all)) << testing::PrintToString(all);
    ASSERT_TRUE(is_valid_utf8(streamed));
  }
}

}  // namespace
}  // namespace arbor::model::unicode

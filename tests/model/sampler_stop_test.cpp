#include "model/sampler_stop.hpp"

#include <gtest/gtest.h>

#include "model/unicode.hpp"

namespace arbor::model {
namespace {

TEST(StopChecker, EndOfGenerationAddsNoText) {
  StopChecker c({}, {2, 0});
  EXPECT_EQ(c.push(10, "Hello"), StopReason::none);
  EXPECT_EQ(c.push(2, "<|im_end|>"), StopReason::end_of_generation);
  EXPECT_EQ(c.text(), "Hello");
  EXPECT_EQ(c.push(11, "more"), StopReason::end_of_generation);  // ignored after a stop
  EXPECT_EQ(c.text(), "Hello");
}

TEST(StopChecker, MaxTokens) {
  StopChecker c({.max_tokens = 3}, {});
  EXPECT_EQ(c.push(1, "a"), StopReason::none);
  EXPECT_EQ(c.push(1, "b"), StopReason::none);
  EXPECT_EQ(c.push(1, "c"), StopReason::max_tokens);
  EXPECT_EQ(c.text(), "abc");
  EXPECT_EQ(c.num_tokens(), 3);
}

TEST(StopChecker, StopStringSpanningTokensIsTrimmed) {
  StopChecker c({.stop = {"\nUser:"}}, {});
  std::string streamed;
  for (const char* piece : {"The answer", " is 4.", "\nUs", "er", ": next"}) {
    const auto r = c.push(5, piece);
    streamed += c.take_ready();
    if (r != StopReason::none) break;
  }
  EXPECT_EQ(c.reason(), StopReason::stop_string);
  EXPECT_EQ(c.text(), "The answer is 4.");
  EXPECT_EQ(streamed, "The answer is 4.");  // "\nUs" was held back, never shown
}

TEST(StopChecker, StopStringInsideOnePieceAndEarliestWins) {
  StopChecker c({.stop = {"END", "ND!"}}, {});
  EXPECT_EQ(c.push(1, "abcEND!xyz"), StopReason::stop_string);
  EXPECT_EQ(c.text(), "abc");
}

TEST(StopChecker, FalseStartIsReleased) {
  StopChecker c({.stop = {"###"}}, {});
  EXPECT_EQ(c.push(1, "a#"), StopReason::none);
  EXPECT_EQ(c.take_ready(), "a");
  EXPECT_EQ(c.push(1, "#b"), StopReason::none);
  EXPECT_EQ(c.take_ready(), "##b");
  EXPECT_EQ(c.text(), "a##b");
}

TEST(StopChecker, HoldsBackIncompleteUtf8) {
  StopChecker c({}, {});
  c.push(1, "\xC3");  // first byte of 'ä'
  EXPECT_EQ(c.take_ready(), "");
  c.push(1, "\xA4!");
  EXPECT_EQ(c.take_ready(), "\xC3\xA4!");
  c.push(1, "\xF0\x9F");  // half an emoji
  EXPECT_EQ(c.take_ready(), "");
  c.push(1, "\xA6\x99");
  EXPECT_EQ(c.take_ready(), "\xF0\x9F\xA6\x99");
}

// max_tokens can end a sequence inside a character: the final text and the stream both
// end with U+FFFD instead of half a character (invalid UTF-8 broke every JSON dump).
TEST(StopChecker, CharacterCutByMaxTokensEndsAsReplacement) {
  StopChecker c({.max_tokens = 2}, {});
  EXPECT_EQ(c.push(1, "ok "), StopReason::none);
  EXPECT_EQ(c.take_ready(), "ok ");
  EXPECT_EQ(c.push(1, "\xF0\x9F"), StopReason::max_tokens);  // half an emoji, then the budget is spent
  EXPECT_EQ(c.take_ready(), "\xEF\xBF\xBD");
  EXPECT_EQ(c.text(), "ok \xEF\xBF\xBD");
}

TEST(StopChecker, InvalidBytesAreReplacedWhileStreaming) {
  StopChecker c({}, {});
  std::string streamed;
  for (const char* piece : {"a\xFF", "\x80" "b", "\xC0\xAF", "\xED\xA0\x80", "\xE2\x82", "\xAC" "z"}) {
    c.push(1, piece);
    const std::string ready = c.take_ready();
    EXPECT_TRUE(unicode::is_valid_utf8(ready));
    streamed += ready;
  }
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(streamed, "a" + fffd + fffd + "b" + fffd + fffd + fffd + fffd + fffd + "\xE2\x82\xAC" "z");
  EXPECT_EQ(c.text(), streamed);
}

TEST(StopChecker, CancelledMidCharacterTextIsValid) {
  StopChecker c({}, {});
  c.push(1, "abc\xE2\x82");
  EXPECT_EQ(c.take_ready(), "abc");
  EXPECT_EQ(c.text(), "abc\xEF\xBF\xBD");  // what a cancelled sequence reports
}

}  // namespace
}  // namespace arbor::model

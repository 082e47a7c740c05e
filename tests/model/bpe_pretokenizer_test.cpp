// Pre-tokenizer splits; expected words produced by Python's `regex` module with the
// original patterns (see model/bpe_pretokenizer.hpp).
#include "model/bpe_pretokenizer.hpp"

#include <gtest/gtest.h>

namespace arbor::model {
namespace {

using Words = std::vector<std::string>;

Words split(PreTokenizer kind, std::string_view text) {
  Words out;
  for (auto w : pre_tokenize(kind, text)) out.emplace_back(w);
  return out;
}

TEST(PreTokenizer, Gpt2MatchesReferenceRegex) {
  EXPECT_EQ(split(PreTokenizer::gpt2, "Hello world's  test\n\nfoo  "),
            (Words{"Hello", " world", "'s", " ", " test", "\n", "\n", "foo", "  "}));
  EXPECT_EQ(split(PreTokenizer::gpt2, "I'LL pay $12345.67!!\r\n\r\n  x\ty"),
            (Words{"I", "'", "LL", " pay", " $", "12345", ".", "67", "!!", "\r\n\r\n ", " x", "\t", "y"}));
  EXPECT_EQ(split(PreTokenizer::gpt2, " \t\n ab(c)  \n"), (Words{" \t\n", " ab", "(", "c", ")", "  \n"}));
  EXPECT_EQ(split(PreTokenizer::gpt2, "Über 3½ ünïcödé — ok?"),
            (Words{"Über", " 3½", " ünïcödé", " —", " ok", "?"}));
  EXPECT_EQ(split(PreTokenizer::gpt2, "don't 'RE 123456789"),
            (Words{"don", "'t", " '", "RE", " 123456789"}));
}

TEST(PreTokenizer, Llama3MatchesReferenceRegex) {
  EXPECT_EQ(split(PreTokenizer::llama3, "Hello world's  test\n\nfoo  "),
            (Words{"Hello", " world", "'s", " ", " test", "\n\n", "foo", "  "}));
  EXPECT_EQ(split(PreTokenizer::llama3, "I'LL pay $12345.67!!\r\n\r\n  x\ty"),
            (Words{"I", "'LL", " pay", " $", "123", "45", ".", "67", "!!\r\n\r\n", " ", " x", "\ty"}));
  EXPECT_EQ(split(PreTokenizer::llama3, " \t\n ab(c)  \n"), (Words{" \t\n", " ab", "(c", ")", "  \n"}));
  EXPECT_EQ(split(PreTokenizer::llama3, "Über 3½ ünïcödé — ok?"),
            (Words{"Über", " ", "3½", " ünïcödé", " —", " ok", "?"}));
  EXPECT_EQ(split(PreTokenizer::llama3, "don't 'RE 123456789"),
            (Words{"don", "'t", " '", "RE", " ", "123", "456", "789"}));
}

TEST(PreTokenizer, DigitsSplitOneByOne) {
  EXPECT_EQ(split(PreTokenizer::digits_then_gpt2, "ab 3½x 42"),
            (Words{"ab", " ", "3", "½", "x", " ", "4", "2"}));
}

TEST(PreTokenizer, InvalidUtf8KeepsEveryByte) {
  const std::string text = "a\xFF\xC3 b\xE2\x82";
  std::string joined;
  for (auto w : pre_tokenize(PreTokenizer::gpt2, text)) joined += w;
  EXPECT_EQ(joined, text);
}

TEST(PreTokenizer, Names) {
  EXPECT_EQ(pre_tokenizer_from_name("smollm"), PreTokenizer::digits_then_gpt2);
  EXPECT_EQ(pre_tokenizer_from_name("gpt-2"), PreTokenizer::gpt2);
  EXPECT_EQ(pre_tokenizer_from_name("llama-bpe"), PreTokenizer::llama3);
  EXPECT_EQ(pre_tokenizer_from_name("no-such-thing"), std::nullopt);
}

}  // namespace
}  // namespace arbor::model

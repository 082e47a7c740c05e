#include "common/json_text.hpp"

#include <gtest/gtest.h>

namespace arbor {
namespace {

std::string nested(std::size_t levels, const std::string& inner = "1") {
  return std::string(levels, '[') + inner + std::string(levels, ']');
}

JsonTextError error_of(std::string_view text) {
  auto r = parse_json_text(text);
  EXPECT_FALSE(r.has_value()) << text.substr(0, 80);
  return r ? JsonTextError{} : r.error();
}

TEST(JsonText, ParsesDocumentsLikeNlohmann) {
  const std::string text = R"({"b": [1, -2, 3.5, 18446744073709551615, true, null, "x\u00e9"], "a": {"k": {}}})";
  auto r = parse_json_text(text);
  ASSERT_TRUE(r.has_value()) << r.error().describe();
  EXPECT_EQ(*r, nlohmann::json::parse(text));
  EXPECT_TRUE((*r)["b"][3].is_number_unsigned());
  EXPECT_EQ(parse_json_text(" 7 ").value(), 7);
  EXPECT_EQ(parse_json_text("\xEF\xBB\xBF{}").value(), nlohmann::json::object());  // one BOM is fine
}

TEST(JsonText, OrderedJsonKeepsMemberOrderAndRepeatedKeysKeepTheLast) {
  auto r = parse_json_text<nlohmann::ordered_json>(R"({"z": 1, "a": 2, "z": 3})");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->dump(), R"({"z":3,"a":2})");
}

TEST(JsonText, NumberOutsideTheDoubleRangeIsAnErrorAtTheNumber) {
  auto e = error_of("{\n  \"x\": 1e999\n}");
  EXPECT_EQ(e.line, 2);
  EXPECT_EQ(e.column, 8);
  EXPECT_NE(e.message.find("number 1e999 is out of range"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("write a smaller number"), std::string::npos);
  EXPECT_EQ(e.message.find("json.exception"), std::string::npos);
  EXPECT_FALSE(parse_json_text("-1e400").has_value());
}

TEST(JsonText, NestingIsBoundedWithoutRecursion) {
  EXPECT_TRUE(parse_json_text(nested(kMaxJsonDepth)).has_value());
  auto e = error_of(nested(kMaxJsonDepth + 1));
  EXPECT_EQ(e.offset, std::size_t(kMaxJsonDepth));  // the bracket opening level 65
  EXPECT_NE(e.message.find("more than 64 levels"), std::string::npos) << e.message;
  // Far deeper than any stack allows for a recursive parser or destructor.
  EXPECT_FALSE(parse_json_text(nested(1'000'000)).has_value());
  EXPECT_FALSE(parse_json_text("{\"a\": " + std::string(200'000, '[')).has_value());
  auto objects = error_of(R"({"s": "[[[[", "o": )" + nested(70, "{}"));
  EXPECT_EQ(objects.offset, 19u + 63u);  // the object is level 1; brackets in strings do not count
  EXPECT_TRUE(parse_json_text(nested(3), 3).has_value());
  EXPECT_FALSE(parse_json_text(nested(4), 3).has_value());
}

TEST(JsonText, MalformedTextSaysWhereAndQuotesPrintably) {
  auto truncated = error_of("{\"a\": [1, 2");
  EXPECT_EQ(truncated.line, 1);
  EXPECT_NE(truncated.message.find("unexpected end of input"), std::string::npos) << truncated.message;
  auto bad_utf8 = error_of("{\"a\": \"caf\xC3\"}");
  EXPECT_NE(bad_utf8.message.find("UTF-8"), std::string::npos) << bad_utf8.message;
  EXPECT_NE(bad_utf8.message.find("\\xC3"), std::string::npos) << bad_utf8.message;
  auto trailing = error_of("{} x");
  EXPECT_EQ(trailing.column, 4);
  auto empty = error_of("");
  EXPECT_NE(empty.message.find("unexpected end of input"), std::string::npos);
  // A long bad token is quoted by its end only.
  auto long_token = error_of("\"" + std::string(10'000, 'a') + "\x01\"");
  EXPECT_LT(long_token.message.size(), 300u);
}

TEST(JsonText, OtherEncodingsAreNamed) {
  auto utf16le = error_of(std::string("\xFF\xFE{\0}\0", 6));
  EXPECT_NE(utf16le.message.find("UTF-16 little-endian (byte order mark FF FE)"), std::string::npos);
  auto utf16be = error_of(std::string("\xFE\xFF\0{\0}", 6));
  EXPECT_NE(utf16be.message.find("UTF-16 big-endian (byte order mark FE FF)"), std::string::npos);
  auto no_bom = error_of(std::string("{\0}\0", 4));
  EXPECT_NE(no_bom.message.find("looks like UTF-16 little-endian"), std::string::npos);
  auto two_boms = error_of("\xEF\xBB\xBF\xEF\xBB\xBF{}");
  EXPECT_NE(two_boms.message.find("two UTF-8 byte order marks"), std::string::npos);
  EXPECT_NE(two_boms.message.find("save the file as UTF-8"), std::string::npos);
}

}  // namespace
}  // namespace arbor

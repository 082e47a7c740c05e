// The byte automaton on hand-picked documents: each keyword's boundary, UTF-8 and
// escapes, the generation form, and rejection (with pointer) of what it cannot enforce.
#include "model/json_grammar.hpp"

#include <gtest/gtest.h>

namespace arbor::model {
namespace {

std::shared_ptr<const JsonGrammar> grammar(const std::string& schema) {
  std::vector<SchemaError> errors;
  auto g = JsonGrammar::from_text(schema, &errors);
  EXPECT_TRUE(g) << schema << ": " << (g ? "" : g.error().message);
  return g ? *g : nullptr;
}

// Every string in `ok` is accepted and every string in `bad` rejected.
void expect_language(const std::string& schema, std::initializer_list<std::string> ok,
                     std::initializer_list<std::string> bad) {
  auto g = grammar(schema);
  ASSERT_TRUE(g);
  for (const auto& s : ok) EXPECT_TRUE(g->accepts(s)) << schema << " should accept " << s;
  for (const auto& s : bad) EXPECT_FALSE(g->accepts(s)) << schema << " should reject " << s;
}

// The first error's pointer when the schema cannot be enforced.
std::string rejection(const std::string& schema) {
  std::vector<SchemaError> errors;
  auto g = JsonGrammar::from_text(schema, &errors);
  EXPECT_FALSE(g) << schema << " should be rejected";
  return errors.empty() ? std::string("<no error>") : errors[0].pointer;
}

TEST(JsonGrammar, ScalarsAndLiterals) {
  expect_language(R"({"type":"null"})", {"null"}, {"nul", "null ", " null", "nulll", "true", ""});
  expect_language(R"({"type":"boolean"})", {"true", "false"}, {"True", "1", "\"true\""});
  expect_language(R"({"type":["string","null"]})", {"null", "\"\"", "\"x\""}, {"1", "[]"});
  expect_language(R"({"const":{"b":[1,"x"],"a":null}})", {R"({"b":[1,"x"],"a":null})", R"({"b":[1.0,"x"],"a":null})"},
                  {R"({"b":[1,"\u0078"],"a":null})" /* x as an escape: outside the generation form */,
                   R"({"a":null,"b":[1,"x"]})", R"({"b":[1,"x"]})", R"({"b":[1,"x"],"a":null,"c":1})"});
  expect_language(R"({"enum":["red","green",3,null,[1]]})", {"\"red\"", "\"green\"", "3", "3.00", "null", "[1]"},
                  {"\"re\"", "\"blue\"", "4", "[1,1]", "[]"});
  // enum values that fail the sibling keywords are dropped.
  expect_language(R"({"type":"string","enum":["a",1,"bb"],"maxLength":1})", {"\"a\""}, {"1", "\"bb\""});
}

TEST(JsonGrammar, Numbers) {
  expect_language(R"({"type":"integer"})", {"0", "-0", "7", "-12", "123456789012345", "3.0", "3.000"},
                  {"01", "-", "1.5", "1e3", "1.", ".5", "+1", "1234567890123456", "--1"});
  expect_language(R"({"type":"number"})", {"0", "0.5", "-0.25", "10.125", "0.000000000000001", "123456789.123456"},
                  {"0.", "1e5", "00", "0.0000000000000001", "1234567890.1234567", "NaN"});
  expect_language(R"({"type":"integer","minimum":-5,"maximum":120})", {"-5", "0", "99", "120", "120.0"},
                  {"-6", "121", "1200", "-50"});
  expect_language(R"({"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":10})", {"1", "9"}, {"0", "10", "-1"});
  expect_language(R"({"type":"number","minimum":0.1,"exclusiveMaximum":0.3})", {"0.1", "0.2", "0.29999", "0.10"},
                  {"0.09999", "0.3", "0.30", "1", "-0.2"});
  expect_language(R"({"type":"number","minimum":-1.5,"maximum":-1.5})", {"-1.5", "-1.50"}, {"-1.4", "1.5", "-1.51"});
}

TEST(JsonGrammar, Strings) {
  expect_language(R"({"type":"string"})",
                  {"\"\"", "\"a b\"", "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "\"\\u0000\\u001f\\u001F\\u000a\"",
                   "\"é€😀\xEE\x80\x87\xEF\xBF\xBF\"" /* U+E007 U+FFFF: not surrogates, a regression */},
                  // \u escapes only for U+0000..U+001F: every other code point is raw UTF-8.
                  {"\"\\u0020\"", "\"\\u0041\"", "\"\\u00e9\"", "\"\\uD83D\\uDE00\"", "\"\\ue007\"",
                   "\"", "\"a", "\"\n\"", "\"\\x\"", "\"\\uD83D\"", "\"\\uDE00\"", "\"\\u12\"", "\"\xC3\"",
                   "\"\xC0\xAF\"", "\"\xED\xA0\x80\"", "\"\xF4\x90\x80\x80\"", "'a'"});
  expect_language(R"({"type":"string","minLength":2,"maxLength":3})", {"\"ab\"", "\"abc\"", "\"é😀\"", "\"\\n\\u0001\""},
                  {"\"a\"", "\"abcd\"", "\"😀\""});
  expect_language(R"({"type":"string","pattern":"^[a-z]+@[a-z]+\\.com$"})", {"\"ann@x.com\""},
                  {"\"Ann@x.com\"", "\"ann@x.co\"", "\"@x.com\""});
  expect_language(R"({"type":"string","pattern":"ab"})", {"\"ab\"", "\"xxabyy\""}, {"\"a\"", "\"ba\"", "\"\\u0061b\""});
  // Patterns match code points: an escaped control character is the character.
  expect_language(R"({"type":"string","pattern":"^a\nb$"})", {"\"a\\nb\"", "\"a\\u000Ab\""}, {"\"a\\\\nb\"", "\"ab\""});
  expect_language(R"({"type":"string","pattern":"^(ab|c){2,3}$","maxLength":4})", {"\"abab\"", "\"cc\"", "\"abc\"", "\"ccc\""},
                  {"\"ababc\"", "\"c\"", "\"ababab\""});
  expect_language(R"({"type":"string","format":"date"})", {"\"2024-02-29\""}, {"\"2024-13-01\"", "\"24-01-01\""});
  expect_language(R"({"type":"string","format":"uuid"})", {"\"123e4567-e89b-12d3-a456-426614174000\""},
                  {"\"123e4567e89b12d3a456426614174000\""});
}

TEST(JsonGrammar, ObjectsFollowSchemaOrder) {
  const std::string s = R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"},
      "c":{"type":"boolean"}},"required":["b"],"additionalProperties":false})";
  expect_language(s, {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"a":1,"b":"x","c":true})", R"({"b":"","c":false})"},
                  {"{}", R"({"a":1})", R"({"b":"x","a":1})", R"({"b":"x","d":1})", R"({"b":"x","b":"y"})",
                   R"({"a":1,"b":"x",})", R"({ "b":"x"})", R"({"b": "x"})"});
  expect_language(R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}})",
                  {"{}", R"({"a":1})", R"({"a":1,"x":"1"})", R"({"x":"1","y":"2"})", R"({"aa":"1"})", R"({"":"1"})"},
                  {R"({"x":1})", R"({"x":"1","a":1})", R"({"x":"1","x":"2"})", R"({"x":"1","\u0078":"2"})",
                   R"({"a":"1"})"});
  // A declared property that no value can match is not an additional one (a regression).
  expect_language(R"({"type":"object","properties":{"x":{"type":"array","minItems":2,"maxItems":1},"y":false},
      "additionalProperties":true})",
                  {"{}", R"({"z":1})"}, {R"({"x":[]})", R"({"\u0078":[1]})", R"({"y":1})"});
  expect_language(R"({"type":"object","required":["k"]})", {R"({"k":[1,{"z":null}]})", R"({"k":1,"m":2})"},
                  {"{}", R"({"m":2,"k":1})"});
}

// advance() over chunks (tokens) that end one additional key and begin the next: the
// written keys are recorded after the chunk, and the next key is checked against them.
TEST(JsonGrammar, AdditionalKeysAcrossChunks) {
  auto g = grammar(R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"integer"}})");
  ASSERT_TRUE(g);
  auto run = [&](std::initializer_list<std::string_view> chunks) {
    MatchState state = g->initial_state();
    std::string doc;
    for (auto c : chunks) {
      if (!g->advance(state, c, doc)) return false;
      doc += c;
    }
    return g->is_complete(state);
  };
  EXPECT_TRUE(run({"{\"", "x\":1,\"xy", "\":2}"}));
  EXPECT_TRUE(run({"{\"x", "\":1,\"", "y\":2,\"z", "\":3}"}));
  EXPECT_FALSE(run({"{\"x", "\":1,\"", "y\":2,\"z\"", ":3}"}));  // y and z end in one chunk
  EXPECT_FALSE(run({"{\"", "x\":1,\"x", "\":2}"}));           // repeats x
  EXPECT_FALSE(run({"{\"\\n\":1,\"\\u000a", "\":2}"}));     // repeats "\n", spelled as \u000a
  EXPECT_FALSE(run({"{\"x\":1,\"y\":2}"}));                    // two keys end in one chunk
  EXPECT_TRUE(run({"{\"x\":1,\"y", "\":2}"}));
  EXPECT_FALSE(run({"{\"x\":1,", "\"y\":2,\"", "x\":3}"}));  // x again, a chunk later
  EXPECT_FALSE(run({"{\"a\":1,\"", "a\":3}"}));                // declared a, then a again
}

TEST(JsonGrammar, Arrays) {
  expect_language(R"({"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3})", {"[1]", "[1,2,3]"},
                  {"[]", "[1,2,3,4]", "[1,]", "[,1]", "[1 ]", "[\"a\"]"});
  expect_language(R"({"type":"array","prefixItems":[{"type":"string"},{"type":"null"}],"items":false})",
                  {"[]", "[\"a\"]", "[\"a\",null]"}, {"[null]", "[\"a\",null,1]"});
  expect_language(R"({"type":"array","items":[{"type":"string"}],"additionalItems":{"type":"integer"}})",
                  {"[\"a\",1,2]"}, {"[1]", "[\"a\",\"b\"]"});
}

TEST(JsonGrammar, AnyOfRefsAndRecursion) {
  expect_language(R"({"anyOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],
      "additionalProperties":false},{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],
      "additionalProperties":false}]})",
                  {R"({"a":1})", R"({"a":"x"})"}, {R"({"a":null})", "{}"});
  expect_language(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"],"additionalProperties":false}},
      "$ref":"#/$defs/node"})",
                  {R"({"v":1})", R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4}]}]})"}, {R"({"v":1,"kids":[{}]})"});
  expect_language(R"({"oneOf":[{"type":"string"},{"type":"integer"}]})", {"\"a\"", "5"}, {"null"});
  expect_language("{}", {"null", "[1,{\"a\":[]}]", "\"s\"", "-1.5"}, {"", "[1,]", "{\"a\"}"});
  expect_language("true", {"1"}, {"x"});
}

TEST(JsonGrammar, RejectsWhatItCannotEnforceWithPointer) {
  EXPECT_EQ(rejection(R"({"type":"integer","multipleOf":3})"), "/multipleOf");
  EXPECT_EQ(rejection(R"({"properties":{"a":{"type":"array","uniqueItems":true}}})"), "/properties/a/uniqueItems");
  EXPECT_EQ(rejection(R"({"type":"object","minProperties":1})"), "/minProperties");
  EXPECT_EQ(rejection(R"({"not":{"type":"null"}})"), "/not");
  EXPECT_EQ(rejection(R"({"allOf":[{"type":"string"},{"maxLength":3}]})"), "/allOf");
  EXPECT_EQ(rejection(R"({"type":"object","anyOf":[{"required":["a"]}]})"), "/anyOf");
  EXPECT_EQ(rejection(R"({"$defs":{"a":{"type":"string"}},"$ref":"#/$defs/a","maxLength":2})"), "/$ref");
  EXPECT_EQ(rejection(R"({"oneOf":[{"type":"string"},{"type":"string","maxLength":3}]})"), "/oneOf");
  EXPECT_EQ(rejection(R"({"type":"string","format":"email"})"), "/format");
  EXPECT_EQ(rejection(R"({"type":"string","pattern":"(a)\\1"})"), "/pattern");
  EXPECT_EQ(rejection(R"j({"type":"string","pattern":"(?=a)"})j"), "/pattern");
  EXPECT_EQ(rejection(R"({"type":"string","maxLenght":3})"), "/maxLenght");
  EXPECT_EQ(rejection(R"({"$ref":"other.json#/a"})"), "/$ref");
  EXPECT_EQ(rejection(R"({"properties":{"x":{"dependentRequired":{}}}})"), "/properties/x/dependentRequired");
  EXPECT_EQ(rejection(R"({"enum":[1e300]})"), "/enum");
  EXPECT_EQ(rejection(R"({"type":"string","minLength":3,"maxLength":2})"), "");
  EXPECT_EQ(rejection(R"({"type":"array","minItems":1,"items":{"$ref":"#"}})"), "");
  // A minimum no generation reaches, written so that it would wrap a 32-bit count to 1.
  EXPECT_EQ(rejection(R"({"type":"string","minLength":4294967297})"), "/minLength");
  EXPECT_EQ(rejection(R"({"properties":{"s":{"type":"string","minLength":1e300}}})"), "/properties/s/minLength");
}

}  // namespace
}  // namespace arbor::model

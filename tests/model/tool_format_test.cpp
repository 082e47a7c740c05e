// The Hermes tool format: the <tools> system text, the schema a call is generated
// under (the grammar compiles; it accepts exactly the calls of the listed tools) and
// reading a call back.
#include "model/tool_format.hpp"

#include <gtest/gtest.h>

#include "model/json_grammar.hpp"

namespace arbor::model {
namespace {

const std::vector<ToolSignature> kTools = {
    {"calculator", "Evaluates arithmetic.",
     R"({"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"],"additionalProperties":false})"},
    {"weather", "Weather of a city.",
     R"({"type":"object","properties":{"city":{"enum":["Paris","Rome"]}},"required":["city"],"additionalProperties":false})"},
};

TEST(ToolFormat, SystemTextListsEachToolAsAFunctionInOrder) {
  const std::string text = tools_system_text(kTools);
  EXPECT_EQ(text, tools_system_text(kTools));  // same tools, same bytes (shared KV pages)
  const auto calc = text.find(
      R"({"type":"function","function":{"name":"calculator","description":"Evaluates arithmetic.","parameters":{"type":"object","properties":{"expression":{"type":"string"}},"required":["expression"],"additionalProperties":false}}})");
  const auto weather = text.find(R"("name":"weather")");
  ASSERT_NE(calc, std::string::npos) << text;
  EXPECT_LT(calc, weather);
  EXPECT_LT(text.rfind("<tools>"), calc);
  EXPECT_LT(weather, text.rfind("</tools>"));
  EXPECT_NE(text.find("<tool_call></tool_call> XML tags"), std::string::npos);
}

TEST(ToolFormat, CallSchemaAcceptsExactlyTheListedToolsCalls) {
  const std::string schema_text = tool_call_schema(kTools);
  ASSERT_TRUE(JsonGrammar::from_text(schema_text)) << schema_text;  // the engine can enforce it
  auto schema = JsonSchema::parse(schema_text, SchemaUse::validation);
  ASSERT_TRUE(schema);
  EXPECT_TRUE(schema->is_valid(Json::parse(R"({"name":"calculator","arguments":{"expression":"1+1"}})")));
  EXPECT_TRUE(schema->is_valid(Json::parse(R"({"name":"weather","arguments":{"city":"Rome"}})")));
  EXPECT_FALSE(schema->is_valid(Json::parse(R"({"name":"weather","arguments":{"expression":"1+1"}})")));
  EXPECT_FALSE(schema->is_valid(Json::parse(R"({"name":"shell","arguments":{}})")));
  EXPECT_FALSE(schema->is_valid(Json::parse(R"({"name":"weather","arguments":{"city":"Oslo"}})")));
  // One tool: the object itself, no anyOf.
  EXPECT_EQ(tool_call_schema(std::span(kTools).first(1)).find("anyOf"), std::string::npos);
}

TEST(ToolFormat, ReadsACallAndWrapsAResponse) {
  auto call = parse_tool_call(R"({"name":"weather","arguments":{"city":"Paris"}})");
  ASSERT_TRUE(call);
  EXPECT_EQ(call->name, "weather");
  EXPECT_EQ(call->arguments.dump(), R"({"city":"Paris"})");
  EXPECT_FALSE(parse_tool_call(R"({"arguments":{}})"));
  EXPECT_FALSE(parse_tool_call("not json"));
  EXPECT_EQ(tool_response_text("42"), "<tool_response>\n42\n</tool_response>");
}

// The arguments come back as generated ("1.50" is not re-serialized as 1.5), and
// tool_call_text renders the call to the same bytes: a conversation sent back in full
// (an OpenAI client returns the call's arguments string) matches the generated history.
TEST(ToolFormat, ACallRendersBackToTheGeneratedBytes) {
  const std::string generated = R"({"name":"pay","arguments":{"amount":1.50,"to":"a\/b"}})";
  auto call = parse_tool_call(generated);
  ASSERT_TRUE(call);
  EXPECT_EQ(call->arguments_text, R"({"amount":1.50,"to":"a\/b"})");
  EXPECT_EQ(tool_call_text(call->name, call->arguments_text), "<tool_call>\n" + generated + "\n</tool_call>");
  // Another layout (spaces): the arguments re-serialized, still the same value.
  auto spaced = parse_tool_call(R"({"name": "pay", "arguments": {"amount": 2}})");
  ASSERT_TRUE(spaced);
  EXPECT_EQ(spaced->arguments_text, R"({"amount":2})");
}

}  // namespace
}  // namespace arbor::model

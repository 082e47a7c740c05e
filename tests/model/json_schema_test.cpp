// The schema compiler and validator: JSON-pointer errors on both sides, and the
// workflow schema (validation use) accepting the shipped workflow examples.
#include "model/json_schema.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace arbor::model {
namespace {

TEST(JsonSchema, ValidationErrorsNameTheValueAndTheKeyword) {
  auto schema = JsonSchema::parse(R"({"type":"object","properties":{"items":{"type":"array","items":{
      "type":"object","properties":{"name":{"type":"string","maxLength":3}},"required":["name"]}}}})");
  ASSERT_TRUE(schema) << schema.error().message;
  const auto ok = schema->validate(Json::parse(R"({"items":[{"name":"ab"}]})"));
  EXPECT_TRUE(ok.empty());
  const auto errors = schema->validate(Json::parse(R"({"items":[{"name":"ab"},{},{"name":"abcd"}]})"));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].pointer, "/items/1");
  EXPECT_NE(errors[0].message.find("/properties/items/items/required"), std::string::npos) << errors[0].message;
  EXPECT_EQ(errors[1].pointer, "/items/2/name");
  EXPECT_NE(errors[1].message.find("/properties/items/items/properties/name/maxLength"), std::string::npos);
}

TEST(JsonSchema, CompileErrorsNameTheKeyword) {
  std::vector<SchemaError> errors;
  EXPECT_FALSE(JsonSchema::parse(R"({"properties":{"a":{"type":"strnig"},"b":{"minLength":-1}}})",
                                 SchemaUse::validation, &errors));
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].pointer, "/properties/a/type");
  EXPECT_EQ(errors[1].pointer, "/properties/b/minLength");
  // Generation use: unknown keywords are errors; validation use: annotations.
  EXPECT_FALSE(JsonSchema::parse(R"({"x-note":1})", SchemaUse::generation));
  EXPECT_TRUE(JsonSchema::parse(R"({"x-note":1})", SchemaUse::validation));
  EXPECT_FALSE(JsonSchema::parse(R"({"$ref":"#/nowhere"})", SchemaUse::validation, &errors));
  EXPECT_EQ(errors[0].pointer, "/$ref");
}

// Found by the openai_request fuzzer: a count past 2^63 written as a float was cast to an
// integer (undefined behaviour). Such counts saturate; fractions and infinities stay errors.
TEST(JsonSchema, CountsWrittenAsHugeFloatsSaturate) {
  auto no_maximum = JsonSchema::parse(R"({"type":"string","maxLength":1e300})");
  ASSERT_TRUE(no_maximum) << no_maximum.error().message;
  EXPECT_TRUE(no_maximum->is_valid(Json("abc")));
  auto unreachable = JsonSchema::parse(R"({"type":"array","minItems":1.8446744073709552e19})");
  ASSERT_TRUE(unreachable) << unreachable.error().message;
  EXPECT_FALSE(unreachable->is_valid(Json::parse("[1,2,3]")));
  std::vector<SchemaError> errors;
  EXPECT_FALSE(JsonSchema::parse(R"({"maxLength":1e300,"minItems":2.5})", SchemaUse::validation, &errors));
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].pointer, "/minItems");
  EXPECT_FALSE(JsonSchema::parse(R"({"minLength":-1e300})"));
}

TEST(JsonSchema, SchemaOrderOption) {
  auto schema = JsonSchema::parse(R"({"properties":{"a":{},"b":{}},"required":["c"]})");
  ASSERT_TRUE(schema);
  const ValidateOptions ordered{.schema_order = true};
  EXPECT_TRUE(schema->is_valid(Json::parse(R"({"b":1,"a":2,"c":3})")));
  EXPECT_FALSE(schema->is_valid(Json::parse(R"({"b":1,"a":2,"c":3})"), ordered));
  EXPECT_TRUE(schema->is_valid(Json::parse(R"({"a":2,"b":1,"c":3,"z":0})"), ordered));
  EXPECT_FALSE(schema->is_valid(Json::parse(R"({"a":2,"z":0,"c":3})"), ordered));
}

TEST(JsonSchema, ChecksTheWorkflowExamplesAgainstTheWorkflowSchema) {
  const std::string root = ARBOR_SOURCE_DIR;
  std::ifstream in(root + "/workflows/schema/workflow.schema.json");
  ASSERT_TRUE(in);
  std::vector<SchemaError> errors;
  auto schema = JsonSchema::compile(Json::parse(in), SchemaUse::validation, &errors);
  ASSERT_TRUE(schema) << describe(errors);
  int checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root + "/workflows/examples")) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream f(entry.path());
    const Json doc = Json::parse(f);
    EXPECT_TRUE(schema->validate(doc).empty()) << entry.path() << ": " << describe(schema->validate(doc));
    Json broken = doc;
    broken["agents"] = "not a list";
    EXPECT_FALSE(schema->validate(broken).empty());
    EXPECT_EQ(schema->validate(broken)[0].pointer, "/agents");
    ++checked;
  }
  EXPECT_GE(checked, 4);
}

}  // namespace
}  // namespace arbor::model

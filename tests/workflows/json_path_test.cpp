// Paths into structured outputs (json_path.hpp): parsing, lookup in a document with
// clear errors for what is absent, the rendering rule, and checks against a schema.
#include "workflows/json_path.hpp"

#include <gtest/gtest.h>

namespace arbor::workflows {
namespace {

JsonPath path(const std::string& text) {
  auto p = parse_json_path(text);
  EXPECT_TRUE(p) << text << ": " << (p ? "" : p.error());
  return p ? *p : JsonPath{};
}

TEST(JsonPath, ParsesPropertiesAndIndexesAndNamesWhatIsMalformed) {
  auto p = path(".tasks[0].title");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].key, "tasks");
  EXPECT_EQ(p[1].index, 0u);
  EXPECT_EQ(p[2].key, "title");
  EXPECT_EQ(path_text(p), ".tasks[0].title");
  EXPECT_TRUE(path("").empty());
  EXPECT_EQ(path("[12][3]").size(), 2u);
  EXPECT_EQ(path(".my-key_2").at(0).key, "my-key_2");
  for (const char* bad : {".", "[x]", "[1", "tasks", ".a..b", "[]", ".a b"}) {
    auto r = parse_json_path(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().find("offset"), std::string::npos) << r.error();
  }
}

TEST(JsonPath, FindsValuesAndSaysWhatIsAbsent) {
  auto doc = JsonValue::parse(R"({"tasks": [{"title": "a"}, {"title": "b", "n": 2}], "s": "x"})");
  EXPECT_EQ(**find_in(doc, path(".tasks[1].n")), 2);
  EXPECT_EQ(*find_in(doc, path("")), &doc);
  EXPECT_EQ(find_in(doc, path(".tasks[2]")).error(),
            "index 2 is past the end of 'tasks' (2 elements)");
  EXPECT_EQ(find_in(doc, path(".tasks[0].body")).error(), "'tasks[0]' has no property 'body'");
  EXPECT_EQ(find_in(doc, path(".s[0]")).error(), "'s' is a string, not an array");
  EXPECT_EQ(find_in(doc, path(".tasks.title")).error(), "'tasks' is an array, not an object");
  EXPECT_EQ(find_in(doc, path("[0]")).error(), "the document is an object, not an array");
}

TEST(JsonPath, AStringRendersRawAnyOtherValueAsCompactJsonInTheOrderGenerated) {
  auto doc = JsonValue::parse(R"({"z": "line \"1\"\nline 2", "a": [1, {"y": true, "b": null}], "n": 2.5})");
  EXPECT_EQ(render_json_value(doc["z"]), "line \"1\"\nline 2");
  EXPECT_EQ(render_json_value(doc["a"]), R"([1,{"y":true,"b":null}])");
  EXPECT_EQ(render_json_value(doc["n"]), "2.5");
  EXPECT_EQ(render_json_value(doc), R"({"z":"line \"1\"\nline 2","a":[1,{"y":true,"b":null}],"n":2.5})");
}

const JsonValue kSchema = JsonValue::parse(R"({
  "type": "object",
  "properties": {
    "tasks": {"type": "array", "maxItems": 3, "items": {"$ref": "#/$defs/task"}},
    "pair": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false},
    "note": {"type": "string"},
    "either": {"anyOf": [{"type": "object", "properties": {"x": {"type": "string"}}}, {"type": "null"}]}
  },
  "$defs": {"task": {"type": "object", "properties": {"title": {"type": "string"}, "detail": {"type": "string"}},
                     "additionalProperties": false}}
})");

TEST(JsonPath, SchemaAtFollowsPropertiesItemsRefsAndAlternatives) {
  EXPECT_EQ(*schema_at(kSchema, path(".tasks[2].title")), JsonValue::parse(R"({"type": "string"})"));
  EXPECT_EQ(*schema_at(kSchema, path(".pair[1]")), JsonValue::parse(R"({"type": "integer"})"));
  EXPECT_EQ(*schema_at(kSchema, path(".either.x")), JsonValue::parse(R"({"type": "string"})"));
  JsonPath each = path(".tasks");
  each.push_back({"", kEachElement});
  each.push_back({"detail", std::nullopt});
  EXPECT_TRUE(schema_at(kSchema, each));
  EXPECT_EQ(not_a_list(kSchema, path(".tasks")), "");
  EXPECT_EQ(not_a_list(kSchema, path(".note")), "/properties/note is not an array (type \"string\")");
}

TEST(JsonPath, SchemaAtNamesWhatIsWrongAndWhere) {
  EXPECT_EQ(schema_at(kSchema, path(".tasks[0].titel")).error(),
            "/$defs/task has no property 'titel' (properties: title, detail)");
  EXPECT_EQ(schema_at(kSchema, path(".tasks[3]")).error(), "index 3 is past /properties/tasks's maxItems (3)");
  EXPECT_EQ(schema_at(kSchema, path(".pair[2]")).error(),
            "index 2 is past the elements /properties/pair allows (items is false)");
  EXPECT_EQ(schema_at(kSchema, path(".note.x")).error(), "/properties/note is not an object (type \"string\")");
  EXPECT_EQ(schema_at(kSchema, path(".nope")).error(),
            "the schema's root has no property 'nope' (properties: tasks, pair, note, either)");
  EXPECT_EQ(schema_at(kSchema, path(".either.y")).error(),
            "/properties/either/anyOf/0 has no property 'y' (properties: x)");
}

TEST(JsonPath, JsonKindNamesEachKindAndSplitsNumbersOnlyWhenAsked) {
  const JsonValue values[] = {JsonValue::object(), JsonValue::array(), "s", true, nullptr, 1.5, 3, 3u};
  const char* one[] = {"an object", "an array", "a string", "a boolean", "null", "a number", "a number", "a number"};
  const char* split[] = {"an object", "an array", "a string", "a boolean", "null", "a number", "an integer",
                         "an integer"};
  for (std::size_t i = 0; i < std::size(values); ++i) {
    EXPECT_STREQ(json_kind(values[i].type()), one[i]) << values[i].dump();
    EXPECT_STREQ(json_kind(values[i].type(), Numbers::split), split[i]) << values[i].dump();
  }
  // find_in names kinds without the split: an integer is "a number" there.
  EXPECT_EQ(find_in(JsonValue::parse(R"({"n": 3})"), path(".n[0]")).error(), "'n' is a number, not an array");
}

}  // namespace
}  // namespace arbor::workflows

// Paths into a structured output (an agent's JSON document, or a dynamic fan-out item):
// the part after the agent id in {{outputs.planner.tasks[0].title}} and in
// "for_each": {"output": "planner.tasks"}, and after "item" in {{item.title}}.
// Grammar: a sequence of ".NAME" (an object property; NAME = letters, digits, '_' or
// '-') and "[N]" (an array element, 0-based decimal). A property whose name has other
// characters cannot be addressed: read the whole value instead.
//
// Rendering rule (templates): the value a path reaches renders as its raw text when it
// is a JSON string, and as compact JSON (keys in the order generated) otherwise.
//
// Two checks use a path: at load time against the referenced agent's output_schema
// (schema_at: each property must be in `properties`, or the schema must allow it with
// an `additionalProperties` schema; an index applies to `prefixItems` / `items` and must
// stay under `maxItems`), and at run time against the actual document (find_in: a
// property or element that is absent fails the agent that reads it).
#pragma once

#include <cstddef>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace arbor::workflows {

using JsonValue = nlohmann::ordered_json;  // key order = generation order

struct PathStep {
  std::string key;                   // a property, when index is unset
  std::optional<std::size_t> index;  // an array element
};
// In schema_at only: "any element of the array" (a dynamic fan-out item).
inline constexpr std::size_t kEachElement = std::size_t(-1);
using JsonPath = std::vector<PathStep>;

// Parses steps ("" = the whole value). The error says what is wrong at which offset.
std::expected<JsonPath, std::string> parse_json_path(std::string_view text);
std::string path_text(const JsonPath& path);  // ".tasks[0].title"

// The value at `path` in `doc`, or why it is absent: "has no property 'x'",
// "index 5 is past the end of the array (3 elements)", "is a string, not an array".
std::expected<const JsonValue*, std::string> find_in(const JsonValue& doc, const JsonPath& path);

// The sub-schema of `schema` (a JSON Schema document) that the value at `path` follows
// (local $refs followed; under anyOf/oneOf the first alternative that has the path; a
// schema that says nothing about the value reached is returned as `true`), or what is
// wrong and where: "/properties/tasks/items has no property 'titel' (properties: title,
// detail)".
std::expected<JsonValue, std::string> schema_at(const JsonValue& schema, const JsonPath& path);

// "" when the value at `path` in documents valid against `schema` can be an array, else
// why not (the path is wrong, or the value is "not an array (type \"object\")").
std::string not_a_list(const JsonValue& schema, const JsonPath& path);

// The rendering rule above.
std::string render_json_value(const JsonValue& value);

// How error messages name a JSON value's kind: "an object", "an array", "a string",
// "a boolean", "null" or "a number"; with Numbers::split, an integer is "an integer"
// (a float stays "a number"). One value_t serves json and ordered_json.
enum class Numbers { one, split };
const char* json_kind(nlohmann::json::value_t type, Numbers numbers = Numbers::one);

}  // namespace arbor::workflows

#include "runtime/server/response_format.hpp"

#include "common/json_text.hpp"
#include "model/json_grammar.hpp"

namespace arbor::server {
namespace {

using nlohmann::json;
using Fail = std::unexpected<ApiError>;

const std::string kSchemaAt = "/response_format/json_schema/schema";


std::expected<std::optional<std::string>, ApiError> json_schema_format(const json& format, const json& body,
                                                                       std::string_view raw_body) {
  const json* spec = format.contains("json_schema") ? &format["json_schema"] : nullptr;
  if (!spec || !spec->is_object())
    return Fail(invalid_param("/response_format/json_schema", "is required: {\"name\": ..., \"schema\": {...}}"));
  if (spec->contains("name") && !(*spec)["name"].is_string())
    return Fail(invalid_param("/response_format/json_schema/name", "must be a string"));
  if (spec->contains("strict") && !(*spec)["strict"].is_boolean() && !(*spec)["strict"].is_null())
    return Fail(invalid_param("/response_format/json_schema/strict", "must be true or false"));
  if (!spec->contains("schema") || !(*spec)["schema"].is_object())
    return Fail(invalid_param(kSchemaAt, "is required: a JSON Schema object"));
  auto text = enforceable_schema(ordered_value(body, raw_body, kSchemaAt), kSchemaAt, "response_format");
  if (!text) return Fail(text.error());
  return std::optional<std::string>(std::move(*text));
}

}  // namespace

model::Json ordered_body(const json& body, std::string_view raw_body) {
  if (!raw_body.empty())
    if (auto doc = parse_json_text<model::Json>(raw_body); doc && doc->is_object()) return std::move(*doc);
  return model::Json::parse(body.dump());
}

model::Json ordered_value(const json& body, std::string_view raw_body, const std::string& pointer) {
  const model::Json::json_pointer at(pointer);
  if (auto doc = ordered_body(body, raw_body); doc.contains(at)) return doc.at(at);
  return model::Json::parse(body.at(json::json_pointer(pointer)).dump());
}

std::expected<std::string, ApiError> enforceable_schema(const model::Json& schema, const std::string& at,
                                                        const std::string& what) {
  std::vector<model::SchemaError> errors;
  if (model::JsonGrammar::from_json(schema, &errors)) return schema.dump();
  if (errors.empty()) return Fail(invalid_param(at, "is not a JSON Schema the server can enforce"));
  std::string why;
  for (const auto& e : errors) why += (why.empty() ? "" : "; ") + at + e.pointer + ": " + e.message;
  return Fail(bad_request("invalid_parameter", what + ": the server cannot enforce this JSON Schema: " + why,
                          at + errors.front().pointer));
}

std::expected<std::optional<std::string>, ApiError> parse_response_format(const json& body, std::string_view raw_body) {
  if (!body.contains("response_format") || body["response_format"].is_null()) return std::nullopt;
  const json& format = body["response_format"];
  if (!format.is_object() || !format.contains("type") || !format["type"].is_string())
    return Fail(invalid_param("/response_format", "must be an object with a \"type\": \"text\", \"json_object\" or \"json_schema\""));
  const std::string type = format["type"].get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") return std::optional<std::string>(R"({"type":"object"})");
  if (type == "json_schema") return json_schema_format(format, body, raw_body);
  return Fail(invalid_param("/response_format/type",
                            "must be \"text\", \"json_object\" or \"json_schema\", not \"" + type + "\""));
}

}  // namespace arbor::server

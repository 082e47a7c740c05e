#include "model/json_schema.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "common/json_pointer.hpp"
#include "common/json_text.hpp"
#include "model/regex.hpp"

namespace arbor::model {

namespace {

const std::set<std::string_view>& annotation_keywords() {
  static const std::set<std::string_view> k = {
      "$schema", "$comment", "title", "description", "default", "examples", "deprecated",
      "readOnly", "writeOnly", "contentEncoding", "contentMediaType"};
  return k;
}

const std::set<std::string_view>& rejected_keywords() {
  static const std::set<std::string_view> k = {
      "dependencies", "dependentRequired", "dependentSchemas", "unevaluatedProperties",
      "unevaluatedItems", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor",
      "$anchor", "$vocabulary", "minContains", "maxContains", "contentSchema"};
  return k;
}

std::string child_pointer(const std::string& base, std::string_view key) {
  return pointer_append(base, key);
}

std::optional<std::uint8_t> type_bits(std::string_view name) {
  if (name == "null") return kTypeNull;
  if (name == "boolean") return kTypeBoolean;
  if (name == "integer") return kTypeInteger;
  if (name == "number") return std::uint8_t(kTypeNumber | kTypeInteger);
  if (name == "string") return kTypeString;
  if (name == "array") return kTypeArray;
  if (name == "object") return kTypeObject;
  return std::nullopt;
}

bool is_non_negative_integer(const Json& v) {
  return is_integer_value(v) && (v.is_number_unsigned() || v.get<double>() >= 0);
}

// A count written as a float past 2^64 (1e300) saturates: no document reaches it either way.
std::uint64_t as_count(const Json& v) {
  if (!v.is_number_float()) return v.get<std::uint64_t>();
  const double d = v.get<double>();
  return d >= 0x1p64 ? std::numeric_limits<std::uint64_t>::max() : std::uint64_t(d);
}

// Percent-decoding and ~0/~1 unescaping of one pointer token of a "#/..." reference.
std::optional<std::string> decode_ref_token(std::string_view token) {
  std::string pct;
  for (std::size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '%' && i + 2 < token.size()) {
      auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
      };
      const int h = hex(token[i + 1]), l = hex(token[i + 2]);
      if (h < 0 || l < 0) return std::nullopt;
      pct += char(h * 16 + l);
      i += 2;
    } else {
      pct += token[i];
    }
  }
  std::string out;
  for (std::size_t i = 0; i < pct.size(); ++i) {
    if (pct[i] == '~' && i + 1 < pct.size() && (pct[i + 1] == '0' || pct[i + 1] == '1')) {
      out += pct[i + 1] == '0' ? '~' : '/';
      ++i;
    } else {
      out += pct[i];
    }
  }
  return out;
}

}  // namespace

std::string describe(const std::vector<SchemaError>& errors) {
  std::string out;
  for (const auto& e : errors) {
    if (!out.empty()) out += "; ";
    out += (e.pointer.empty() ? std::string("(root)") : e.pointer) + ": " + e.message;
  }
  return out;
}

bool SchemaNode::has(std::string_view keyword) const {
  return std::find(keywords.begin(), keywords.end(), keyword) != keywords.end();
}

std::string_view format_pattern(std::string_view format) {
  // RFC 3339 full-date / full-time / date-time, RFC 4122 UUID (any version, hex in
  // either case). Calendar validity beyond "month 01-12, day 01-31" is not checked.
  if (format == "date") return "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$";
  if (format == "time")
    return "^([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$";
  if (format == "date-time")
    return "^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt]([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)"
           "(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$";
  if (format == "uuid")
    return "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
  return {};
}

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& document, SchemaUse use) : document_(document), use_(use) {}

  Result<JsonSchema> run(std::vector<SchemaError>* errors_out) {
    compile(document_, "");
    while (!refs_.empty()) {
      auto [id, ref, pointer] = refs_.back();
      refs_.pop_back();
      resolve(id, ref, pointer);
    }
    if (errors_out) *errors_out = errors_;
    if (!errors_.empty())
      return fail(ErrorCode::invalid_argument, "JSON Schema: " + describe(errors_));
    JsonSchema s;
    s.nodes_ = std::make_shared<const std::vector<SchemaNode>>(std::move(nodes_));
    s.document_ = std::make_shared<const Json>(document_);
    s.use_ = use_;
    return s;
  }

 private:
  void error(const std::string& pointer, std::string message) { errors_.push_back({pointer, std::move(message)}); }

  NodeId compile(const Json& j, const std::string& pointer) {
    if (auto it = by_pointer_.find(pointer); it != by_pointer_.end()) return it->second;
    const NodeId id = NodeId(nodes_.size());
    nodes_.emplace_back();
    by_pointer_[pointer] = id;
    nodes_[std::size_t(id)].pointer = pointer;
    if (j.is_boolean()) {
      nodes_[std::size_t(id)].boolean_schema = j.get<bool>();
      return id;
    }
    if (!j.is_object()) {
      error(pointer, "a schema must be an object or a boolean");
      nodes_[std::size_t(id)].boolean_schema = true;
      return id;
    }
    for (const auto& [key, value] : j.items()) keyword(id, j, key, value, child_pointer(pointer, key));
    return id;
  }

  SchemaNode& at(NodeId id) { return nodes_[std::size_t(id)]; }

  NodeId sub(const Json& j, const std::string& pointer) { return compile(j, pointer); }

  std::vector<NodeId> sub_array(const Json& v, const std::string& p, const std::string& kw, bool non_empty) {
    std::vector<NodeId> out;
    if (!v.is_array() || (non_empty && v.empty())) {
      error(p, "'" + kw + "' must be a" + std::string(non_empty ? " non-empty" : "n") + " array of schemas");
      return out;
    }
    for (std::size_t i = 0; i < v.size(); ++i) out.push_back(sub(v[i], p + "/" + std::to_string(i)));
    return out;
  }

  std::optional<std::uint64_t> count(const Json& v, const std::string& p, const std::string& kw) {
    if (!is_non_negative_integer(v)) {
      error(p, "'" + kw + "' must be a non-negative integer");
      return std::nullopt;
    }
    return as_count(v);
  }

  std::optional<double> number(const Json& v, const std::string& p, const std::string& kw) {
    if (!v.is_number()) {
      error(p, "'" + kw + "' must be a number" +
                   std::string(v.is_boolean() ? " (draft-4 boolean exclusive bounds are not supported: "
                                                "write exclusiveMinimum/exclusiveMaximum as numbers)"
                                              : ""));
      return std::nullopt;
    }
    return v.get<double>();
  }

  std::shared_ptr<const CharDfa> pattern(std::string_view source, const std::string& p) {
    auto it = patterns_.find(std::string(source));
    if (it != patterns_.end()) return it->second;
    auto dfa = compile_pattern(source);
    if (!dfa) {
      error(p, dfa.error().message);
      return nullptr;
    }
    auto shared = std::make_shared<const CharDfa>(std::move(*dfa));
    patterns_.emplace(std::string(source), shared);
    return shared;
  }

  void keyword(NodeId id, const Json& schema, const std::string& kw, const Json& v, const std::string& p) {
    at(id).keywords.push_back(kw);
    if (annotation_keywords().contains(kw)) return;
    if (rejected_keywords().contains(kw)) {
      error(p, "keyword '" + kw + "' is not supported");
      return;
    }
    if (kw == "$id") {
      if (!at(id).pointer.empty()) error(p, "'$id' is only supported at the root (references resolve against it)");
      return;
    }
    if (kw == "$defs" || kw == "definitions") {
      if (!v.is_object()) return error(p, "'" + kw + "' must be an object of schemas");
      for (const auto& [name, s] : v.items()) sub(s, child_pointer(p, name));
      return;
    }
    if (kw == "type") return type(id, v, p);
    if (kw == "enum") {
      if (!v.is_array()) return error(p, "'enum' must be an array");
      at(id).enum_values = std::vector<Json>(v.begin(), v.end());
      return;
    }
    if (kw == "const") {
      at(id).const_value = v;
      return;
    }
    if (kw == "$ref") {
      if (!v.is_string()) return error(p, "'$ref' must be a string");
      refs_.push_back({id, v.get<std::string>(), p});
      return;
    }
    if (kw == "minLength") {
      at(id).min_length = count(v, p, kw);
      return;
    }
    if (kw == "maxLength") {
      at(id).max_length = count(v, p, kw);
      return;
    }
    if (kw == "pattern") {
      if (!v.is_string()) return error(p, "'pattern' must be a string");
      at(id).pattern_source = v.get<std::string>();
      at(id).pattern = pattern(at(id).pattern_source, p);
      return;
    }
    if (kw == "format") {
      if (!v.is_string()) return error(p, "'format' must be a string");
      const std::string name = v.get<std::string>();
      const auto source = format_pattern(name);
      if (source.empty()) {
        if (use_ == SchemaUse::generation)
          error(p, "format '" + name + "' is not enforced (supported: date, time, date-time, uuid); use a "
                       "'pattern' instead");
        return;
      }
      at(id).format_name = name;
      at(id).format = pattern(source, p);
      return;
    }
    if (kw == "minimum") {
      at(id).minimum = number(v, p, kw);
      return;
    }
    if (kw == "maximum") {
      at(id).maximum = number(v, p, kw);
      return;
    }
    if (kw == "exclusiveMinimum") {
      at(id).exclusive_minimum = number(v, p, kw);
      return;
    }
    if (kw == "exclusiveMaximum") {
      at(id).exclusive_maximum = number(v, p, kw);
      return;
    }
    if (kw == "multipleOf") {
      auto m = number(v, p, kw);
      if (m && *m <= 0) return error(p, "'multipleOf' must be greater than 0");
      at(id).multiple_of = m;
      return;
    }
    if (kw == "items") {
      if (v.is_array()) {
        if (schema.contains("prefixItems")) return error(p, "'items' as an array together with 'prefixItems'");
        at(id).prefix_items = sub_array(v, p, kw, false);
      } else {
        // 2020-12: the schema of the items after prefixItems (or of all items). Draft-7
        // tuples (items as an array) put the rest in additionalItems instead.
        at(id).items = sub(v, p);
      }
      return;
    }
    if (kw == "prefixItems") {
      at(id).prefix_items = sub_array(v, p, kw, false);
      return;
    }
    if (kw == "additionalItems") {
      const auto items = schema.find("items");
      if (items != schema.end() && items->is_array()) at(id).items = sub(v, p);
      else sub(v, p);  // no effect (draft 7), but still a schema to check
      return;
    }
    if (kw == "minItems") {
      at(id).min_items = count(v, p, kw);
      return;
    }
    if (kw == "maxItems") {
      at(id).max_items = count(v, p, kw);
      return;
    }
    if (kw == "uniqueItems") {
      if (!v.is_boolean()) return error(p, "'uniqueItems' must be a boolean");
      at(id).unique_items = v.get<bool>();
      return;
    }
    if (kw == "contains") {
      at(id).contains = sub(v, p);
      return;
    }
    if (kw == "properties") {
      if (!v.is_object()) return error(p, "'properties' must be an object of schemas");
      for (const auto& [name, s] : v.items()) {
        const NodeId child = sub(s, child_pointer(p, name));
        at(id).properties.emplace_back(name, child);
      }
      return;
    }
    if (kw == "required") {
      if (!v.is_array()) return error(p, "'required' must be an array of strings");
      std::set<std::string> seen;
      for (const auto& r : v) {
        if (!r.is_string()) return error(p, "'required' must be an array of strings");
        if (seen.insert(r.get<std::string>()).second) at(id).required.push_back(r.get<std::string>());
      }
      return;
    }
    if (kw == "additionalProperties") {
      at(id).additional = sub(v, p);
      return;
    }
    if (kw == "propertyNames") {
      at(id).property_names = sub(v, p);
      return;
    }
    if (kw == "patternProperties") {
      if (!v.is_object()) return error(p, "'patternProperties' must be an object of schemas");
      for (const auto& [source, s] : v.items()) {
        auto dfa = pattern(source, child_pointer(p, source));
        const NodeId child = sub(s, child_pointer(p, source));
        if (dfa) at(id).pattern_properties.emplace_back(dfa, child);
      }
      return;
    }
    if (kw == "minProperties") {
      at(id).min_properties = count(v, p, kw);
      return;
    }
    if (kw == "maxProperties") {
      at(id).max_properties = count(v, p, kw);
      return;
    }
    if (kw == "anyOf") {
      at(id).any_of = sub_array(v, p, kw, true);
      return;
    }
    if (kw == "oneOf") {
      at(id).one_of = sub_array(v, p, kw, true);
      return;
    }
    if (kw == "allOf") {
      at(id).all_of = sub_array(v, p, kw, true);
      return;
    }
    if (kw == "not") {
      at(id).not_node = sub(v, p);
      return;
    }
    if (kw == "if") {
      at(id).if_node = sub(v, p);
      return;
    }
    if (kw == "then") {
      at(id).then_node = sub(v, p);
      return;
    }
    if (kw == "else") {
      at(id).else_node = sub(v, p);
      return;
    }
    if (use_ == SchemaUse::generation)
      error(p, "unknown keyword '" + kw + "' (generation enforces every keyword; remove it or fix its spelling)");
  }

  void type(NodeId id, const Json& v, const std::string& p) {
    std::uint8_t bits = 0;
    auto add = [&](const Json& name) {
      if (!name.is_string()) return error(p, "'type' must be a type name or an array of them");
      auto b = type_bits(name.get<std::string>());
      if (!b) return error(p, "unknown type '" + name.get<std::string>() + "'");
      bits |= *b;
    };
    if (v.is_array()) {
      for (const auto& t : v) add(t);
    } else {
      add(v);
    }
    at(id).types = bits;
    at(id).has_type = true;
  }

  void resolve(NodeId id, const std::string& ref, const std::string& p) {
    if (ref.empty() || ref[0] != '#') {
      return error(p, "$ref '" + ref + "' is not a local reference (only \"#\" and \"#/...\" JSON pointers)");
    }
    if (ref.size() > 1 && ref[1] != '/')
      return error(p, "$ref '" + ref + "' names an anchor; only JSON pointers (\"#/...\") are supported");
    const Json* target = &document_;
    std::string pointer;
    std::size_t pos = 1;
    while (pos < ref.size()) {
      const std::size_t next = ref.find('/', pos + 1);
      const std::string_view raw = std::string_view(ref).substr(pos + 1, next == std::string::npos ? std::string::npos
                                                                                                    : next - pos - 1);
      auto token = decode_ref_token(raw);
      if (!token) return error(p, "$ref '" + ref + "' has a malformed %-escape");
      if (target->is_object() && target->contains(*token)) {
        target = &(*target)[*token];
      } else if (target->is_array() && !token->empty() &&
                 std::all_of(token->begin(), token->end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                 std::stoul(*token) < target->size()) {
        target = &(*target)[std::stoul(*token)];
      } else {
        return error(p, "$ref '" + ref + "' points to nothing in this schema");
      }
      pointer = child_pointer(pointer, *token);
      pos = next == std::string::npos ? ref.size() : next;
    }
    const NodeId target_id = compile(*target, pointer);
    at(id).ref = target_id;
  }

  const Json& document_;
  SchemaUse use_;
  std::vector<SchemaNode> nodes_;
  std::map<std::string, NodeId> by_pointer_;
  std::map<std::string, std::shared_ptr<const CharDfa>> patterns_;
  std::vector<std::tuple<NodeId, std::string, std::string>> refs_;
  std::vector<SchemaError> errors_;
};

Result<JsonSchema> JsonSchema::compile(const Json& schema, SchemaUse use, std::vector<SchemaError>* errors) {
  SchemaCompiler c(schema, use);
  return c.run(errors);
}

Result<JsonSchema> JsonSchema::compile(const nlohmann::json& schema, SchemaUse use, std::vector<SchemaError>* errors) {
  return compile(Json::parse(schema.dump()), use, errors);
}

Result<JsonSchema> JsonSchema::parse(std::string_view text, SchemaUse use, std::vector<SchemaError>* errors) {
  auto j = parse_json_text<Json>(text);
  if (!j) {
    if (errors) *errors = {{"", "not valid JSON: " + j.error().describe()}};
    return fail(ErrorCode::invalid_argument, "JSON Schema: not valid JSON: " + j.error().describe());
  }
  return compile(*j, use, errors);
}

}  // namespace arbor::model

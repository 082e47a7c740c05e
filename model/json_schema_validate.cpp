// The validator: walks a document and the compiled schema graph together.
#include <cmath>
#include <limits>

#include "common/json_pointer.hpp"
#include "model/json_schema.hpp"

namespace arbor::model {

namespace {

constexpr int kMaxDepth = 1000;  // nested schema applications at one place: a $ref loop

std::string short_dump(const Json& v) {
  std::string s = v.dump(-1, ' ', false, nlohmann::detail::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return s;
}

bool type_matches(const Json& v, std::uint8_t types) {
  switch (v.type()) {
    case Json::value_t::null: return types & kTypeNull;
    case Json::value_t::boolean: return types & kTypeBoolean;
    case Json::value_t::string: return types & kTypeString;
    case Json::value_t::array: return types & kTypeArray;
    case Json::value_t::object: return types & kTypeObject;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return (types & kTypeNumber) || ((types & kTypeInteger) && is_integer_value(v));
    default: return false;
  }
}

std::size_t code_point_length(const std::string& s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool numbers_equal(const Json& a, const Json& b) {
  const bool ai = a.is_number_integer() || a.is_number_unsigned();
  const bool bi = b.is_number_integer() || b.is_number_unsigned();
  if (ai && bi) {
    if (a.is_number_unsigned() && b.is_number_unsigned()) return a.get<std::uint64_t>() == b.get<std::uint64_t>();
    if (a.is_number_unsigned() && a.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
      return false;
    if (b.is_number_unsigned() && b.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
      return false;
    return a.get<std::int64_t>() == b.get<std::int64_t>();
  }
  return a.get<double>() == b.get<double>();
}

bool multiple_of(const Json& v, double m) {
  if ((v.is_number_integer() || v.is_number_unsigned()) && m == std::floor(m) && m < 9.0e18) {
    const auto mi = std::int64_t(m);
    return v.is_number_unsigned() ? v.get<std::uint64_t>() % std::uint64_t(mi) == 0 : v.get<std::int64_t>() % mi == 0;
  }
  const double q = v.get<double>() / m;
  if (!std::isfinite(q)) return false;
  return std::abs(q - std::round(q)) <= 1e-9 * std::max(1.0, std::abs(q));
}

}  // namespace

bool is_integer_value(const Json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return true;
  if (!v.is_number_float()) return false;
  const double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d;
}

bool json_equal(const Json& a, const Json& b, bool ordered) {
  if (a.is_number() && b.is_number()) return numbers_equal(a, b);
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case Json::value_t::array:
      if (a.size() != b.size()) return false;
      for (std::size_t i = 0; i < a.size(); ++i)
        if (!json_equal(a[i], b[i], ordered)) return false;
      return true;
    case Json::value_t::object: {
      if (a.size() != b.size()) return false;
      if (ordered) {
        auto ia = a.begin();
        for (auto ib = b.begin(); ib != b.end(); ++ia, ++ib)
          if (ia.key() != ib.key() || !json_equal(*ia, *ib, ordered)) return false;
        return true;
      }
      for (const auto& [k, v] : a.items()) {
        auto it = b.find(k);
        if (it == b.end() || !json_equal(v, *it, ordered)) return false;
      }
      return true;
    }
    default: return a == b;
  }
}

class SchemaValidator {
 public:
  SchemaValidator(const std::vector<SchemaNode>& nodes, const ValidateOptions& options,
                  std::vector<SchemaError>* errors)
      : nodes_(nodes), options_(options), errors_(errors) {}

  // True when `v` is valid against node `id`. Quiet checks record nothing and stop at
  // the first failure (anyOf/oneOf/not/if trials).
  bool check(NodeId id, const Json& v, const std::string& at, bool quiet) {
    if (++depth_ > kMaxDepth) {
      --depth_;
      report(at, "schema references loop without consuming the value (" + nodes_[std::size_t(id)].pointer + ")",
             quiet);
      return false;
    }
    const bool ok = check_node(nodes_[std::size_t(id)], v, at, quiet);
    --depth_;
    return ok;
  }

 private:
  void report(const std::string& at, std::string message, bool quiet) {
    if (quiet || !errors_ || errors_->size() >= options_.max_errors) return;
    errors_->push_back({at, std::move(message)});
  }

  bool check_node(const SchemaNode& n, const Json& v, const std::string& at, bool quiet) {
    if (n.boolean_schema) {
      if (!*n.boolean_schema) report(at, "no value is allowed here (false schema at '" + n.pointer + "')", quiet);
      return *n.boolean_schema;
    }
    bool ok = true;
    auto bad = [&](const std::string& keyword, const std::string& message) {
      ok = false;
      report(at, message + " (" + n.pointer + "/" + keyword + ")", quiet);
    };
#define ARBOR_STOP_IF_QUIET \
  if (!ok && quiet) return false
    if (n.has_type && !type_matches(v, n.types)) bad("type", short_dump(v) + " has the wrong type");
    ARBOR_STOP_IF_QUIET;
    if (n.enum_values) {
      bool found = false;
      for (const auto& e : *n.enum_values) found = found || json_equal(v, e, options_.schema_order);
      if (!found) bad("enum", short_dump(v) + " is not one of the enum values");
    }
    if (n.const_value && !json_equal(v, *n.const_value, options_.schema_order))
      bad("const", short_dump(v) + " is not the const value " + short_dump(*n.const_value));
    ARBOR_STOP_IF_QUIET;
    if (n.ref != kNoNode && !check(n.ref, v, at, quiet)) ok = false;
    ARBOR_STOP_IF_QUIET;
    if (v.is_string()) check_string(n, v.get_ref<const std::string&>(), bad);
    else if (v.is_number()) check_number(n, v, bad);
    else if (v.is_array()) check_array(n, v, at, quiet, ok, bad);
    else if (v.is_object()) check_object(n, v, at, quiet, ok, bad);
    ARBOR_STOP_IF_QUIET;
    check_combinators(n, v, at, quiet, ok, bad);
#undef ARBOR_STOP_IF_QUIET
    return ok;
  }

  template <class Bad>
  void check_string(const SchemaNode& n, const std::string& s, Bad& bad) {
    if (n.min_length || n.max_length) {
      const std::size_t len = code_point_length(s);
      if (n.min_length && len < *n.min_length)
        bad("minLength", "string of length " + std::to_string(len) + " is shorter than " + std::to_string(*n.min_length));
      if (n.max_length && len > *n.max_length)
        bad("maxLength", "string of length " + std::to_string(len) + " is longer than " + std::to_string(*n.max_length));
    }
    if (n.pattern && n.pattern->match(s) == CharDfa::kReject)
      bad("pattern", short_dump(Json(s)) + " does not match the pattern '" + n.pattern_source + "'");
    if (n.format && n.format->match(s) == CharDfa::kReject)
      bad("format", short_dump(Json(s)) + " is not a valid " + n.format_name);
  }

  template <class Bad>
  void check_number(const SchemaNode& n, const Json& v, Bad& bad) {
    const double d = v.get<double>();
    auto bound = [](double b) { return Json(b).dump(); };
    if (n.minimum && !(d >= *n.minimum)) bad("minimum", short_dump(v) + " is less than " + bound(*n.minimum));
    if (n.maximum && !(d <= *n.maximum)) bad("maximum", short_dump(v) + " is greater than " + bound(*n.maximum));
    if (n.exclusive_minimum && !(d > *n.exclusive_minimum))
      bad("exclusiveMinimum", short_dump(v) + " is not greater than " + bound(*n.exclusive_minimum));
    if (n.exclusive_maximum && !(d < *n.exclusive_maximum))
      bad("exclusiveMaximum", short_dump(v) + " is not less than " + bound(*n.exclusive_maximum));
    if (n.multiple_of && !multiple_of(v, *n.multiple_of))
      bad("multipleOf", short_dump(v) + " is not a multiple of " + bound(*n.multiple_of));
  }

  template <class Bad>
  void check_array(const SchemaNode& n, const Json& v, const std::string& at, bool quiet, bool& ok, Bad& bad) {
    if (n.min_items && v.size() < *n.min_items)
      bad("minItems", "array of " + std::to_string(v.size()) + " items has fewer than " + std::to_string(*n.min_items));
    if (n.max_items && v.size() > *n.max_items)
      bad("maxItems", "array of " + std::to_string(v.size()) + " items has more than " + std::to_string(*n.max_items));
    if (!ok && quiet) return;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const NodeId item = i < n.prefix_items.size() ? n.prefix_items[i] : n.items;
      if (item != kNoNode && !check(item, v[i], at + "/" + std::to_string(i), quiet)) {
        ok = false;
        if (quiet) return;
      }
    }
    if (n.unique_items)
      for (std::size_t i = 0; i < v.size(); ++i)
        for (std::size_t j = i + 1; j < v.size(); ++j)
          if (json_equal(v[i], v[j])) {
            bad("uniqueItems", "items " + std::to_string(i) + " and " + std::to_string(j) + " are equal");
            i = j = v.size();
          }
    if (n.contains != kNoNode) {
      bool any = false;
      for (std::size_t i = 0; i < v.size() && !any; ++i) any = check(n.contains, v[i], at, true);
      if (!any) bad("contains", "no item matches 'contains'");
    }
  }

  template <class Bad>
  void check_object(const SchemaNode& n, const Json& v, const std::string& at, bool quiet, bool& ok, Bad& bad) {
    for (const auto& r : n.required)
      if (!v.contains(r)) bad("required", "required property '" + r + "' is missing");
    if (n.min_properties && v.size() < *n.min_properties)
      bad("minProperties", "object has fewer than " + std::to_string(*n.min_properties) + " properties");
    if (n.max_properties && v.size() > *n.max_properties)
      bad("maxProperties", "object has more than " + std::to_string(*n.max_properties) + " properties");
    if (!ok && quiet) return;
    if (options_.schema_order && (!n.properties.empty() || !n.required.empty())) check_order(n, v, bad);
    for (const auto& [key, value] : v.items()) {
      const std::string child = pointer_append(at, key);
      bool matched = false;
      for (const auto& [name, node] : n.properties)
        if (name == key) {
          matched = true;
          if (!check(node, value, child, quiet)) ok = false;
          break;
        }
      for (const auto& [dfa, node] : n.pattern_properties)
        if (dfa->match(key) != CharDfa::kReject) {
          matched = true;
          if (!check(node, value, child, quiet)) ok = false;
        }
      if (!matched && n.additional != kNoNode) {
        const SchemaNode& a = nodes_[std::size_t(n.additional)];
        if (a.boolean_schema && !*a.boolean_schema) bad("additionalProperties", "property '" + key + "' is not allowed");
        else if (!check(n.additional, value, child, quiet)) ok = false;
      }
      if (n.property_names != kNoNode && !check(n.property_names, Json(key), child, true))
        bad("propertyNames", "property name '" + key + "' is not valid");
      if (!ok && quiet) return;
    }
  }

  template <class Bad>
  void check_order(const SchemaNode& n, const Json& v, Bad& bad) {
    auto declared_index = [&](const std::string& key) -> long {
      for (std::size_t i = 0; i < n.properties.size(); ++i)
        if (n.properties[i].first == key) return long(i);
      long extra = long(n.properties.size());
      for (const auto& r : n.required) {
        bool in_properties = false;
        for (const auto& p : n.properties) in_properties = in_properties || p.first == r;
        if (in_properties) continue;
        if (r == key) return extra;
        ++extra;
      }
      return -1;
    };
    long last = -1;
    bool seen_other = false;
    for (const auto& [key, value] : v.items()) {
      const long i = declared_index(key);
      if (i < 0) {
        seen_other = true;
      } else if (seen_other || i < last) {
        bad("properties", "property '" + key + "' is out of the schema's order");
        return;
      } else {
        last = i;
      }
    }
  }

  template <class Bad>
  void check_combinators(const SchemaNode& n, const Json& v, const std::string& at, bool quiet, bool& ok, Bad& bad) {
    for (NodeId a : n.all_of)
      if (!check(a, v, at, quiet)) {
        ok = false;
        if (quiet) return;
      }
    if (!n.any_of.empty()) {
      bool any = false;
      for (std::size_t i = 0; i < n.any_of.size() && !any; ++i) any = check(n.any_of[i], v, at, true);
      if (!any) bad("anyOf", short_dump(v) + " matches none of the anyOf alternatives");
    }
    if (!n.one_of.empty()) {
      int matches = 0;
      for (NodeId a : n.one_of) matches += check(a, v, at, true);
      if (matches != 1)
        bad("oneOf", short_dump(v) + " matches " + std::to_string(matches) + " oneOf alternatives instead of one");
    }
    if (n.not_node != kNoNode && check(n.not_node, v, at, true)) bad("not", short_dump(v) + " matches the 'not' schema");
    if (n.if_node != kNoNode) {
      if (check(n.if_node, v, at, true)) {
        if (n.then_node != kNoNode && !check(n.then_node, v, at, quiet)) ok = false;
      } else if (n.else_node != kNoNode && !check(n.else_node, v, at, quiet)) {
        ok = false;
      }
    }
  }

  const std::vector<SchemaNode>& nodes_;
  const ValidateOptions& options_;
  std::vector<SchemaError>* errors_;
  int depth_ = 0;
};

std::vector<SchemaError> JsonSchema::validate(const Json& value, const ValidateOptions& options) const {
  std::vector<SchemaError> errors;
  SchemaValidator v(*nodes_, options, &errors);
  if (!v.check(root(), value, "", false) && errors.empty()) errors.push_back({"", "value is not valid"});
  return errors;
}

std::vector<SchemaError> JsonSchema::validate(const nlohmann::json& value, const ValidateOptions& options) const {
  return validate(Json::parse(value.dump()), options);
}

bool JsonSchema::is_valid(const Json& value, const ValidateOptions& options) const {
  return is_valid_at(root(), value, options);
}

bool JsonSchema::is_valid_at(NodeId node, const Json& value, const ValidateOptions& options) const {
  SchemaValidator v(*nodes_, options, nullptr);
  return v.check(node, value, "", true);
}

}  // namespace arbor::model

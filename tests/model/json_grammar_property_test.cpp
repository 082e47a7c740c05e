// Property test: for random schemas (every enforced keyword, nesting, $ref, anyOf,
// oneOf), random documents drawn from the schema (mostly valid, written in random
// string escapes and number forms) and mutations of them (edited bytes, shuffled keys,
// wrong types, values out of range), the byte automaton accepts a text exactly when
// the reference (json_reference.hpp: parser + validator) does.
#include <gtest/gtest.h>

#include <charconv>

#include "json_reference.hpp"
#include "json_schema_gen.hpp"
#include "model/json_grammar.hpp"
#include "model/unicode.hpp"

namespace arbor::model {
namespace {

using namespace testing;

// ---- random documents, drawn from a schema ----

class DocGen {
 public:
  DocGen(Gen& g, const Json& root) : g_(g), root_(root) {}

  Json value(const Json& s, int depth = 0) {
    if (s.is_boolean()) return random_scalar(g_);
    if (g_.chance(0.04) || depth > 8) return random_scalar(g_);  // likely invalid
    if (s.contains("$ref")) {
      const std::string ref = s["$ref"];
      return value(root_.at("$defs").at(ref.substr(std::string("#/$defs/").size())), depth + 1);
    }
    if (s.contains("allOf")) return value(s["allOf"][0], depth + 1);
    if (s.contains("enum")) return g_.pick(std::vector<Json>(s["enum"].begin(), s["enum"].end()));
    if (s.contains("const")) return s["const"];
    if (s.contains("anyOf")) return value(s["anyOf"][std::size_t(g_.below(int(s["anyOf"].size())))], depth + 1);
    if (s.contains("oneOf")) return value(s["oneOf"][std::size_t(g_.below(int(s["oneOf"].size())))], depth + 1);
    std::string type = "null";
    if (s.contains("type")) {
      const Json& t = s.at("type");
      type = t.is_array() ? t.at(std::size_t(g_.below(int(t.size())))).get<std::string>() : t.get<std::string>();
    }
    if (type == "null") return nullptr;
    if (type == "boolean") return g_.chance(0.5);
    if (type == "integer") {
      const int lo = s.value("minimum", s.value("exclusiveMinimum", -30) + 1);
      const int hi = s.value("maximum", s.value("exclusiveMaximum", 300) - 1);
      return lo - 2 + g_.below(std::max(1, hi - lo + 5));
    }
    if (type == "number") {
      const double lo = s.value("minimum", -60.0), hi = s.value("exclusiveMaximum", 40.0);
      return lo - 1 + double(g_.below(int((hi - lo + 2) * 16))) / 16.0;
    }
    if (type == "string") return string(s);
    if (type == "array") return array(s, depth);
    return object(s, depth);
  }

 private:
  Json string(const Json& s) {
    if (s.contains("pattern"))
      for (const auto& p : patterns())
        if (p.pattern == s["pattern"]) return p.make(g_);
    if (s.contains("format")) {
      const std::string f = s["format"];
      if (f == "date") return make_date(g_);
      if (f == "time") return make_time(g_);
      if (f == "date-time") return make_date(g_) + "T" + make_time(g_);
      return make_uuid(g_);
    }
    const int lo = s.value("minLength", 0), hi = s.value("maxLength", 8);
    std::string out;
    static const std::vector<std::string> chars = {"a", "b", "Z", " ", "é", "€", "😀", "\"", "\\", "\n", "\t",
                                                   "\x01", "/", "{", "0"};
    for (int n = std::max(0, lo - 1 + g_.below(hi - lo + 3)); n > 0; --n) out += g_.pick(chars);
    return out;
  }
  Json array(const Json& s, int depth) {
    const int lo = s.value("minItems", 0), hi = s.value("maxItems", lo + 3);
    const int n = std::max(0, lo - 1 + g_.below(hi - lo + 3));
    Json a = Json::array();
    const std::size_t num_prefix = s.contains("prefixItems") ? s["prefixItems"].size() : 0;
    for (int i = 0; i < n; ++i) {
      if (std::size_t(i) < num_prefix) a.push_back(value(s["prefixItems"][std::size_t(i)], depth + 1));
      else if (s.contains("items")) a.push_back(value(s["items"], depth + 1));
      else a.push_back(random_scalar(g_));
    }
    return a;
  }
  Json object(const Json& s, int depth) {
    Json o = Json::object();
    const Json required = s.value("required", Json::array());
    const Json properties = s.value("properties", Json::object());
    for (const auto& [name, sub] : properties.items()) {
      const bool req = std::find(required.begin(), required.end(), name) != required.end();
      if (req ? g_.chance(0.97) : g_.chance(0.6)) o[name] = value(sub, depth + 1);
    }
    const Json extra = s.value("additionalProperties", Json(true));
    if (!(extra.is_boolean() && !extra.get<bool>()) ? g_.chance(0.4) : g_.chance(0.05)) {
      for (int i = 1 + g_.below(2); i > 0; --i) {
        const std::string key = g_.pick(std::vector<std::string>{"extra", "z", "é", "a", "extra"});
        o[key] = extra.is_object() ? value(extra, depth + 1) : random_scalar(g_);
      }
    }
    return o;
  }

  Gen& g_;
  const Json& root_;
};

// ---- writing documents in the generation form, with random spellings ----

void write_string(Gen& g, std::string_view s, std::string& out) {
  out += '"';
  std::vector<std::uint32_t> cps;
  if (!decode_utf8(s, cps)) cps.clear();
  for (std::uint32_t cp : cps) {
    const bool must = cp < 0x20 || cp == '"' || cp == '\\';
    if (must || g.chance(0.03)) {  // an optional \u escape is outside the generation form
      switch (cp) {
        case '"': out += "\\\""; continue;
        case '\\': out += "\\\\"; continue;
        case '\n': out += g.chance(0.5) ? "\\n" : "\\u000a"; continue;
        case '\t': out += "\\t"; continue;
        case '/': out += "\\/"; continue;
        default: break;
      }
      char buf[16];
      if (cp >= 0x10000) {
        const std::uint32_t v = cp - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04X\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, g.chance(0.5) ? "\\u%04x" : "\\u%04X", cp);
      }
      out += buf;
      continue;
    }
    unicode::append_utf8(out, cp);
  }
  out += '"';
}

void write(Gen& g, const Json& v, std::string& out) {
  switch (v.type()) {
    case Json::value_t::string: write_string(g, v.get_ref<const std::string&>(), out); break;
    case Json::value_t::array:
      out += '[';
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (i) out += ',';
        write(g, v[i], out);
      }
      out += ']';
      break;
    case Json::value_t::object: {
      std::vector<std::pair<std::string, const Json*>> items;
      for (const auto& [k, x] : v.items()) items.emplace_back(k, &x);
      if (items.size() > 1 && g.chance(0.05)) std::swap(items[0], items[1]);  // out of order
      if (!items.empty() && g.chance(0.05)) items.push_back(items.back());      // duplicate key
      out += '{';
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += ',';
        write_string(g, items[i].first, out);
        out += ':';
        write(g, *items[i].second, out);
      }
      out += '}';
      break;
    }
    case Json::value_t::number_float: {
      char buf[64];
      auto r = std::to_chars(buf, buf + sizeof buf, v.get<double>(), std::chars_format::fixed);
      std::string s(buf, r.ptr);
      if (s.find('.') == std::string::npos && g.chance(0.5)) s += ".0";
      if (s.find('.') != std::string::npos && g.chance(0.3)) s += "0";
      out += s;
      break;
    }
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: {
      out += v.dump();
      if (g.chance(0.1)) out += ".0";
      break;
    }
    default: out += v.dump();
  }
}

std::string mutate(Gen& g, std::string text) {
  static const std::vector<std::string> inserts = {"\"", "{", "}", "[", "]", ",", ":", "0", "9", "-", ".", "a",
                                                   "\\", " ", "é", "\xC3", "e", "null", "1"};
  const int n = 1 + g.below(2);
  for (int i = 0; i < n; ++i) {
    const std::size_t pos = text.empty() ? 0 : std::size_t(g.below(int(text.size()) + 1));
    switch (g.below(3)) {
      case 0:
        if (pos < text.size()) text.erase(pos, 1);
        break;
      case 1: text.insert(pos, g.pick(inserts)); break;
      default:
        if (pos < text.size()) text.replace(pos, 1, g.pick(inserts));
    }
  }
  return text;
}

TEST(JsonGrammarProperty, AutomatonAcceptsExactlyTheValidDocuments) {
  Gen g(20240611);
  int num_schemas = 0, num_valid = 0, num_invalid = 0;
  for (int trial = 0; trial < 400; ++trial) {
    SchemaGen sg(g);
    const Json schema_json = sg.root();
    std::vector<SchemaError> errors;
    auto schema = JsonSchema::compile(schema_json, SchemaUse::generation, &errors);
    ASSERT_TRUE(schema) << schema_json.dump() << ": " << describe(errors);
    auto grammar = JsonGrammar::compile(*schema, &errors);
    if (!grammar) {
      // Random constraints may contradict each other (e.g. an enum value that no type
      // allows); anything else is a bug.
      ASSERT_TRUE(errors.size() == 1 && errors[0].pointer.empty()) << schema_json.dump() << ": " << describe(errors);
      continue;
    }
    ++num_schemas;
    DocGen dg(g, schema_json);
    for (int d = 0; d < 25; ++d) {
      std::string text;
      write(g, dg.value(schema_json), text);
      if (d % 3 == 2) text = mutate(g, text);
      const bool expected = testing::reference_accepts(*schema, text);
      const bool actual = (*grammar)->accepts(text);
      ASSERT_EQ(actual, expected) << "schema " << schema_json.dump() << "\ntext " << text;
      (expected ? num_valid : num_invalid)++;
    }
  }
  // The generators must exercise both sides.
  EXPECT_GT(num_schemas, 300);
  EXPECT_GT(num_valid, 2500);
  EXPECT_GT(num_invalid, 2500);
  std::cout << num_schemas << " schemas, " << num_valid << " valid and " << num_invalid << " invalid documents\n";
}

}  // namespace
}  // namespace arbor::model

// Property test: for random schemas (every enforced keyword, nesting, $ref, anyOf,
// oneOf), random documents drawn from the schema (mostly valid, written in random
// string escapes and number forms) and mutations of them (edited bytes, shuffled keys,
// wrong types, values out of range), the byte automaton accepts a text exactly when
// the reference (json_reference.hpp: parser + validator) does.
#include <gtest/gtest.h>

#include <charconv>

#include "json_reference.hpp"
#include "model/json_grammar.hpp"
#include "model/sampler.hpp"

namespace arbor::model {
namespace {

class Gen {
 public:
  explicit Gen(std::uint64_t seed) : rng_(seed) {}
  std::uint64_t next() { return rng_.next(); }
  int below(int n) { return int(rng_.next() % std::uint64_t(n)); }
  bool chance(double p) { return rng_.uniform() < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[std::size_t(below(int(v.size())))];
  }

 private:
  SamplerRng rng_;
};

// ---- patterns and formats with generators of matching strings ----

struct PatternCase {
  std::string pattern;
  std::string (*make)(Gen&);
};

std::string letters(Gen& g, int lo, int hi, char first, char last) {
  std::string s;
  const int n = lo + g.below(hi - lo + 1);
  for (int i = 0; i < n; ++i) s += char(first + g.below(last - first + 1));
  return s;
}
std::string digits(Gen& g, int n) { return letters(g, n, n, '0', '9'); }

const std::vector<PatternCase>& patterns() {
  static const std::vector<PatternCase> p = {
      {"^[a-z]{2,5}$", [](Gen& g) { return letters(g, 2, 5, 'a', 'z'); }},
      {"^[A-Z][a-z]*$", [](Gen& g) { return letters(g, 1, 1, 'A', 'Z') + letters(g, 0, 4, 'a', 'z'); }},
      {"^\\d{3}-\\d{4}$", [](Gen& g) { return digits(g, 3) + "-" + digits(g, 4); }},
      {"ab", [](Gen& g) { return letters(g, 0, 2, 'a', 'c') + "ab" + letters(g, 0, 2, 'x', 'z'); }},
      {"^(red|green|blue)$", [](Gen& g) { return std::string(g.pick(std::vector<std::string>{"red", "green", "blue"})); }},
      {"^[^\"\\\\]{0,4}$", [](Gen& g) { return letters(g, 0, 4, 'a', 'e') + (g.chance(0.3) ? "é" : ""); }},
      {"é+", [](Gen& g) { return std::string(g.chance(0.5) ? "x" : "") + "éé"; }},
      {"^\\w+@\\w+\\.com$", [](Gen& g) { return letters(g, 1, 3, 'a', 'z') + "@" + letters(g, 1, 3, 'a', 'z') + ".com"; }},
      {"^(ab|c)*$", [](Gen& g) {
         std::string s;
         for (int i = g.below(4); i > 0; --i) s += g.chance(0.5) ? "ab" : "c";
         return s;
       }},
  };
  return p;
}

std::string two(Gen& g, int lo, int hi) {
  const int v = lo + g.below(hi - lo + 1);
  return std::string(v < 10 ? "0" : "") + std::to_string(v);
}
std::string make_date(Gen& g) { return digits(g, 4) + "-" + two(g, 1, 12) + "-" + two(g, 1, 28); }
std::string make_time(Gen& g) {
  return two(g, 0, 23) + ":" + two(g, 0, 59) + ":" + two(g, 0, 59) + (g.chance(0.3) ? ".5" : "") +
         (g.chance(0.5) ? "Z" : "+01:00");
}
std::string make_uuid(Gen& g) {
  std::string s;
  for (int n : {8, 4, 4, 4, 12}) {
    if (!s.empty()) s += '-';
    for (int i = 0; i < n; ++i) s += "0123456789abcdefABCDEF"[g.below(22)];
  }
  return s;
}

// ---- random schemas ----

const std::vector<std::string> kNames = {"a", "b", "name", "x_1", "é", "k\"q", "long_property_name", "a/b", ""};

Json random_scalar(Gen& g) {
  switch (g.below(7)) {
    case 0: return nullptr;
    case 1: return g.chance(0.5);
    case 2: return g.below(200) - 100;
    case 3: return double(g.below(2000) - 1000) / 8.0;
    case 4: return g.pick(std::vector<std::string>{"a", "red", "é", "x y", "\"q\"", "", "😀", "line\nbreak"});
    case 5: return Json::array({g.below(3), "s"});
    default: return Json::object({{"k", g.below(3)}, {"z", nullptr}});
  }
}

class SchemaGen {
 public:
  explicit SchemaGen(Gen& g) : g_(g) {}

  Json root() {
    Json s = node(0);
    if (!defs_.empty()) s["$defs"] = defs_;
    return s;
  }

 private:
  Json node(int depth) {
    const int kinds = depth >= 3 ? 9 : 15;
    switch (g_.below(kinds)) {
      case 0: return {{"type", "null"}};
      case 1: return {{"type", "boolean"}};
      case 2: return integer();
      case 3: return number();
      case 4:
      case 5: return string();
      case 6: {
        Json values = Json::array();
        for (int i = 1 + g_.below(4); i > 0; --i) values.push_back(random_scalar(g_));
        return {{"enum", values}};
      }
      case 7: return {{"const", random_scalar(g_)}};
      case 8: return {{"type", Json::array({"string", "null"})}, {"maxLength", 3}};
      case 9:
      case 10: return array(depth);
      case 11:
      case 12: return object(depth);
      case 13: {
        Json alts = Json::array();
        for (int i = 2 + g_.below(2); i > 0; --i) alts.push_back(node(depth + 1));
        return {{"anyOf", alts}};
      }
      default: {
        if (g_.chance(0.5)) {  // oneOf over different types: provably disjoint
          return {{"oneOf", Json::array({string(), integer(), {{"type", "null"}}})}};
        }
        const std::string name = "d" + std::to_string(defs_.size());
        defs_[name] = node(depth + 1);
        if (g_.chance(0.3)) return {{"allOf", Json::array({{{"$ref", "#/$defs/" + name}}})}};
        return {{"$ref", "#/$defs/" + name}};
      }
    }
  }

  Json integer() {
    Json s = {{"type", "integer"}};
    if (g_.chance(0.5)) s[g_.chance(0.7) ? "minimum" : "exclusiveMinimum"] = g_.below(40) - 20;
    if (g_.chance(0.5)) s[g_.chance(0.7) ? "maximum" : "exclusiveMaximum"] = 25 + g_.below(200);
    return s;
  }
  Json number() {
    Json s = {{"type", "number"}};
    if (g_.chance(0.4)) s["minimum"] = double(g_.below(100) - 50) / 4.0;
    if (g_.chance(0.4)) s["exclusiveMaximum"] = 20.5 + double(g_.below(100)) / 10.0;
    return s;
  }
  Json string() {
    Json s = {{"type", "string"}};
    const int kind = g_.below(6);
    if (kind == 0) s["pattern"] = g_.pick(patterns()).pattern;
    if (kind == 1) s["format"] = g_.pick(std::vector<std::string>{"date", "time", "date-time", "uuid"});
    if (kind <= 3 && g_.chance(0.5)) s["minLength"] = g_.below(3);
    if (kind >= 2 && g_.chance(0.6)) s["maxLength"] = 3 + g_.below(8);
    return s;
  }
  Json array(int depth) {
    Json s = {{"type", "array"}};
    if (g_.chance(0.3)) {
      Json prefix = Json::array();
      for (int i = 1 + g_.below(2); i > 0; --i) prefix.push_back(node(depth + 1));
      s["prefixItems"] = prefix;
      if (g_.chance(0.5)) s["items"] = false;
      else s["items"] = node(depth + 1);
    } else {
      s["items"] = node(depth + 1);
    }
    if (g_.chance(0.4)) s["minItems"] = g_.below(3);
    if (g_.chance(0.4)) s["maxItems"] = 2 + g_.below(3);
    return s;
  }
  Json object(int depth) {
    Json s = {{"type", "object"}};
    Json props = Json::object();
    Json required = Json::array();
    for (int i = g_.below(4); i > 0; --i) {
      const std::string name = g_.pick(kNames);
      if (props.contains(name)) continue;
      props[name] = node(depth + 1);
      if (g_.chance(0.5)) required.push_back(name);
    }
    s["properties"] = props;
    if (!required.empty()) s["required"] = required;
    switch (g_.below(4)) {
      case 0: s["additionalProperties"] = false; break;
      case 1: s["additionalProperties"] = true; break;
      case 2: s["additionalProperties"] = {{"type", "integer"}}; break;
      default: break;
    }
    return s;
  }

  Gen& g_;
  Json defs_ = Json::object();
};

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
    if (must || g.chance(0.1)) {
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
    append_utf8(out, cp);
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

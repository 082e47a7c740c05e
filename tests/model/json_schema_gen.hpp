// Random JSON Schemas (and matching strings for their patterns and formats) for the
// property tests of constrained decoding.
#pragma once

#include <string>
#include <vector>

#include "model/json_schema.hpp"
#include "model/sampler.hpp"

namespace arbor::model::testing {

// Sanitizer builds (scripts/test.sh's ASan + UBSan stage) run the same property checks
// on fewer random cases: they are 10-20x slower.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr int kCaseDivisor = 8;
#else
inline constexpr int kCaseDivisor = 1;
#endif

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

inline std::string letters(Gen& g, int lo, int hi, char first, char last) {
  std::string s;
  const int n = lo + g.below(hi - lo + 1);
  for (int i = 0; i < n; ++i) s += char(first + g.below(last - first + 1));
  return s;
}
inline std::string digits(Gen& g, int n) { return letters(g, n, n, '0', '9'); }

inline const std::vector<PatternCase>& patterns() {
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

inline std::string two(Gen& g, int lo, int hi) {
  const int v = lo + g.below(hi - lo + 1);
  return std::string(v < 10 ? "0" : "") + std::to_string(v);
}
inline std::string make_date(Gen& g) { return digits(g, 4) + "-" + two(g, 1, 12) + "-" + two(g, 1, 28); }
inline std::string make_time(Gen& g) {
  return two(g, 0, 23) + ":" + two(g, 0, 59) + ":" + two(g, 0, 59) + (g.chance(0.3) ? ".5" : "") +
         (g.chance(0.5) ? "Z" : "+01:00");
}
inline std::string make_uuid(Gen& g) {
  std::string s;
  for (int n : {8, 4, 4, 4, 12}) {
    if (!s.empty()) s += '-';
    for (int i = 0; i < n; ++i) s += "0123456789abcdefABCDEF"[g.below(22)];
  }
  return s;
}

// ---- random schemas ----

inline const std::vector<std::string> kNames = {"a", "b", "name", "x_1", "é", "k\"q", "long_property_name", "a/b", ""};

inline Json random_scalar(Gen& g) {
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

// Random schemas over every enforced keyword. `bounded`: every document is short (strings
// and arrays capped, no additional properties), for generation with a token budget.
class SchemaGen {
 public:
  explicit SchemaGen(Gen& g, bool bounded = false) : g_(g), bounded_(bounded) {}

  Json root() {
    Json s = node(0);
    if (!defs_.empty()) s["$defs"] = defs_;
    return s;
  }

 private:
  Json node(int depth) {
    const int kinds = depth >= (bounded_ ? 2 : 3) ? 9 : 15;
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
    if (kind >= 2 && (bounded_ || g_.chance(0.6))) s["maxLength"] = 3 + g_.below(8);
    if (bounded_ && kind < 2) s["maxLength"] = kind == 0 ? 12 : 32;
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
    if (bounded_ || g_.chance(0.4)) s["maxItems"] = 2 + g_.below(3);
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
    switch (bounded_ ? 0 : g_.below(4)) {
      case 0: s["additionalProperties"] = false; break;
      case 1: s["additionalProperties"] = true; break;
      case 2: s["additionalProperties"] = {{"type", "integer"}}; break;
      default: break;
    }
    return s;
  }

  Gen& g_;
  bool bounded_;
  Json defs_ = Json::object();
};

}  // namespace arbor::model::testing

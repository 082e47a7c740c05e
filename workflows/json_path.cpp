#include "workflows/json_path.hpp"

#include <cctype>

namespace arbor::workflows {

namespace {

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

std::string escape_pointer(const std::string& key) {
  std::string out;
  for (char c : key) out += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return out;
}

std::string where(const std::string& at) { return at.empty() ? "the schema's root" : at; }

// A location in the schema document.
struct Loc {
  const JsonValue* s;
  std::string at;
};

const JsonValue& any_schema() {
  static const JsonValue yes = true;
  return yes;
}

// Whether a schema's "type" (absent = any) admits `type`.
bool admits(const JsonValue& s, const char* type) {
  if (!s.is_object() || !s.contains("type")) return true;
  const JsonValue& t = s["type"];
  if (t.is_string()) return t.get<std::string>() == type || (std::string(type) == "number" && t == "integer");
  if (t.is_array())
    for (const auto& e : t)
      if (e.is_string() && e.get<std::string>() == type) return true;
  return !t.is_string() && !t.is_array();
}

std::string type_text(const JsonValue& s) { return s["type"].dump(); }

// The outcome of one step on a schema's own keywords: a sub-schema, an error, or
// nothing said (the step may still be answered by $ref / allOf / anyOf / oneOf).
struct Own {
  std::optional<Loc> found;
  std::string error;
};

Own own_key_step(const Loc& l, const std::string& key) {
  const JsonValue& s = *l.s;
  if (!admits(s, "object")) return {std::nullopt, where(l.at) + " is not an object (type " + type_text(s) + ")"};
  const bool has_props = s.contains("properties") && s["properties"].is_object();
  if (has_props && s["properties"].contains(key))
    return {Loc{&s["properties"][key], l.at + "/properties/" + escape_pointer(key)}, ""};
  if (s.contains("additionalProperties") && s["additionalProperties"].is_object())
    return {Loc{&s["additionalProperties"], l.at + "/additionalProperties"}, ""};
  if (has_props) {
    std::string names;
    for (const auto& [name, _] : s["properties"].items()) names += (names.empty() ? "" : ", ") + name;
    return {std::nullopt, where(l.at) + " has no property '" + key + "' (properties: " + names + ")"};
  }
  if (s.contains("additionalProperties") && s["additionalProperties"] == false)
    return {std::nullopt, where(l.at) + " allows no properties"};
  if (s.contains("type")) return {Loc{&any_schema(), l.at}, ""};  // an open object: unchecked
  return {};
}

Own own_index_step(const Loc& l, std::size_t i) {
  const JsonValue& s = *l.s;
  const std::string n = std::to_string(i);
  if (!admits(s, "array")) return {std::nullopt, where(l.at) + " is not an array (type " + type_text(s) + ")"};
  if (i == kEachElement) {  // any element: the items schema, unchecked with a tuple only
    if (s.contains("items") && !s["items"].is_array()) return {Loc{&s["items"], l.at + "/items"}, ""};
    if (s.contains("type") || s.contains("prefixItems") || s.contains("items")) return {Loc{&any_schema(), l.at}, ""};
    return {};
  }
  if (s.contains("maxItems") && s["maxItems"].is_number_unsigned() && i >= s["maxItems"].get<std::size_t>())
    return {std::nullopt, "index " + n + " is past " + where(l.at) + "'s maxItems (" + s["maxItems"].dump() + ")"};
  for (const char* tuple : {"prefixItems", "items"})
    if (s.contains(tuple) && s[tuple].is_array() && i < s[tuple].size())
      return {Loc{&s[tuple][i], l.at + "/" + tuple + "/" + n}, ""};
  const char* rest = s.contains("items") && s["items"].is_array() ? "additionalItems" : "items";
  if (s.contains(rest)) {
    if (s[rest] == false)
      return {std::nullopt, "index " + n + " is past the elements " + where(l.at) + " allows (" + rest + " is false)"};
    return {Loc{&s[rest], l.at + "/" + rest}, ""};
  }
  if (s.contains("type") || s.contains("prefixItems")) return {Loc{&any_schema(), l.at}, ""};
  return {};
}

class Walker {
 public:
  explicit Walker(const JsonValue& root) : root_(root) {}

  std::expected<Loc, std::string> step(const Loc& l, const PathStep& st, int depth) const {
    if (depth > 32) return std::unexpected(where(l.at) + ": $ref or combinator chain too deep to follow");
    if (l.s->is_boolean()) {
      if (*l.s == false) return std::unexpected(where(l.at) + " is the schema false (no value is valid)");
      return Loc{&any_schema(), l.at};
    }
    if (!l.s->is_object()) return Loc{&any_schema(), l.at};
    Own own = st.index ? own_index_step(l, *st.index) : own_key_step(l, st.key);
    if (own.found) return *own.found;
    std::string first = own.error;
    bool alternatives = false;
    auto try_one = [&](const Loc& alt) -> std::optional<Loc> {
      alternatives = true;
      auto r = step(alt, st, depth + 1);
      if (r) return *r;
      if (first.empty()) first = r.error();
      return std::nullopt;
    };
    if (own.error.empty()) {  // own keywords said nothing: ask $ref and the combinators
      if (auto target = deref(*l.s))
        if (auto r = try_one(*target)) return *r;
      for (const char* kw : {"allOf", "anyOf", "oneOf"})
        if (l.s->contains(kw) && (*l.s)[kw].is_array())
          for (std::size_t k = 0; k < (*l.s)[kw].size(); ++k)
            if (auto r = try_one(Loc{&(*l.s)[kw][k], l.at + "/" + kw + "/" + std::to_string(k)})) return *r;
    }
    if (!first.empty()) return std::unexpected(first);
    (void)alternatives;
    return Loc{&any_schema(), l.at};  // the schema says nothing about this value
  }

  std::optional<Loc> deref(const JsonValue& s) const {
    if (!s.contains("$ref") || !s["$ref"].is_string()) return std::nullopt;
    const std::string ref = s["$ref"].get<std::string>();
    if (ref.empty() || ref[0] != '#') return std::nullopt;
    try {
      return Loc{&root_.at(JsonValue::json_pointer(ref.substr(1))), ref.substr(1)};
    } catch (const std::exception&) {
      return std::nullopt;  // the schema compiler reports unresolvable references
    }
  }

 private:
  const JsonValue& root_;
};

}  // namespace

std::expected<JsonPath, std::string> parse_json_path(std::string_view text) {
  JsonPath out;
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t at = i;
    if (text[i] == '.') {
      std::size_t e = ++i;
      while (e < text.size() && name_char(text[e])) ++e;
      if (e == i)
        return std::unexpected("expected a property name after '.' at offset " + std::to_string(at) +
                               " (letters, digits, '_' or '-')");
      out.push_back({std::string(text.substr(i, e - i)), std::nullopt});
      i = e;
    } else if (text[i] == '[') {
      std::size_t e = ++i;
      while (e < text.size() && std::isdigit(static_cast<unsigned char>(text[e]))) ++e;
      if (e == i || e >= text.size() || text[e] != ']' || e - i > 9)
        return std::unexpected("expected an array index like [0] at offset " + std::to_string(at));
      out.push_back({"", std::size_t(std::stoul(std::string(text.substr(i, e - i))))});
      i = e + 1;
    } else {
      return std::unexpected(std::string("unexpected '") + text[i] + "' at offset " + std::to_string(at) +
                             ": a path is a sequence of .NAME and [INDEX]");
    }
  }
  return out;
}

std::string path_text(const JsonPath& path) {
  std::string out;
  for (const auto& s : path) out += s.index ? "[" + std::to_string(*s.index) + "]" : "." + s.key;
  return out;
}

std::expected<const JsonValue*, std::string> find_in(const JsonValue& doc, const JsonPath& path) {
  const JsonValue* v = &doc;
  JsonPath done;
  for (const auto& st : path) {
    const std::string here = done.empty() ? "the document" : "'" + path_text(done).substr(done[0].index ? 0 : 1) + "'";
    if (st.index) {
      if (!v->is_array()) return std::unexpected(here + " is " + json_kind(v->type()) + ", not an array");
      if (*st.index >= v->size())
        return std::unexpected("index " + std::to_string(*st.index) + " is past the end of " + here + " (" +
                               std::to_string(v->size()) + " element" + (v->size() == 1 ? "" : "s") + ")");
      v = &(*v)[*st.index];
    } else {
      if (!v->is_object()) return std::unexpected(here + " is " + json_kind(v->type()) + ", not an object");
      auto it = v->find(st.key);
      if (it == v->end()) return std::unexpected(here + " has no property '" + st.key + "'");
      v = &*it;
    }
    done.push_back(st);
  }
  return v;
}

namespace {
std::expected<Loc, std::string> walk(const Walker& w, const JsonValue& schema, const JsonPath& path) {
  Loc l{&schema, ""};
  for (const auto& st : path) {
    auto next = w.step(l, st, 0);
    if (!next) return std::unexpected(next.error());
    l = *next;
  }
  return l;
}
}  // namespace

std::expected<JsonValue, std::string> schema_at(const JsonValue& schema, const JsonPath& path) {
  Walker w(schema);
  auto l = walk(w, schema, path);
  if (!l) return std::unexpected(l.error());
  return *l->s;
}

std::string not_a_list(const JsonValue& schema, const JsonPath& path) {
  Walker w(schema);
  auto l = walk(w, schema, path);
  if (!l) return l.error();
  const JsonValue* s = l->s;
  for (int hops = 0; hops < 32 && s->is_object(); ++hops) {
    if (!admits(*s, "array")) return where(l->at) + " is not an array (type " + type_text(*s) + ")";
    auto target = w.deref(*s);
    if (!target) break;
    s = target->s;
  }
  return "";
}

std::string render_json_value(const JsonValue& value) {
  if (value.is_string()) return value.get<std::string>();
  return value.dump(-1, ' ', false, JsonValue::error_handler_t::replace);
}

const char* json_kind(nlohmann::json::value_t type, Numbers numbers) {
  using T = nlohmann::json::value_t;
  switch (type) {
    case T::object: return "an object";
    case T::array: return "an array";
    case T::string: return "a string";
    case T::boolean: return "a boolean";
    case T::null: return "null";
    case T::number_float: return "a number";
    default: return numbers == Numbers::split ? "an integer" : "a number";
  }
}

}  // namespace arbor::workflows

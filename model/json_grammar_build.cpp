// Schema graph -> grammar graph: what generation can enforce, and what it cannot.
#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "model/json_grammar.hpp"
#include "model/json_grammar_internal.hpp"

namespace arbor::model {

namespace {

using namespace grammar_detail;

constexpr Int128 pow10_128(int n) {
  Int128 v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}
constexpr Int128 kUnit = pow10_128(kMaxNumberDigits);  // 1.0 in grid units
constexpr Int128 kBig = pow10_128(31);                 // beyond any writable number
constexpr std::uint64_t kMaxStringTable = 1u << 24;

const std::set<std::string_view>& non_assertions() {
  static const std::set<std::string_view> k = {
      "$schema", "$id", "$comment", "title", "description", "default", "examples", "deprecated",
      "readOnly", "writeOnly", "contentEncoding", "contentMediaType", "$defs", "definitions"};
  return k;
}

// Floor and ceiling of v * 1e15, exact from v's shortest decimal form (which is what
// the schema author wrote, and what makes the comparison agree with doubles: see the
// number form in json_grammar.hpp).
struct GridValue {
  Int128 floor, ceil;
  bool exact;
};
GridValue to_grid(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string_view s(buf, std::size_t(r.ptr - buf));
  bool neg = false;
  if (!s.empty() && s[0] == '-') neg = true, s.remove_prefix(1);
  Int128 m = 0;
  int num_digits = 0, exp10 = 0;
  bool after_dot = false;
  std::size_t i = 0;
  for (; i < s.size() && s[i] != 'e'; ++i) {
    if (s[i] == '.') {
      after_dot = true;
      continue;
    }
    m = m * 10 + (s[i] - '0');
    if (m != 0) ++num_digits;
    if (after_dot) --exp10;
  }
  if (i < s.size()) exp10 += std::stoi(std::string(s.substr(i + 1)));
  if (m == 0) return {0, 0, true};
  const int e = exp10 + kMaxNumberDigits;
  Int128 lo, hi;
  bool exact = true;
  if (e >= 0) {
    if (num_digits + e > 31) {
      lo = hi = kBig;
      exact = false;
    } else {
      lo = hi = m * pow10_128(e);
    }
  } else {
    Int128 q = 0;
    bool rem = true;
    if (-e <= 36) {
      q = m / pow10_128(-e);
      rem = m % pow10_128(-e) != 0;
    }
    lo = q, hi = q + (rem ? 1 : 0);
    exact = !rem;
  }
  if (neg) return {-hi, -lo, exact};
  return {lo, hi, exact};
}

int decimal_digits(Int128 v) {
  int n = 0;
  for (; v > 0; v /= 10) ++n;
  return n;
}

bool is_universal(const CharDfa& d) {
  if (d.num_states() != 1 || !d.accepts(0)) return false;
  const auto e = d.edges(0);
  return e.size() == 2 && e[0].lo == 0 && e[0].hi == 0xD7FF && e[1].lo == 0xE000 && e[1].hi == kMaxCodePoint &&
         e[0].target == 0 && e[1].target == 0;
}

std::string quote(std::string_view s) { return "'" + std::string(s) + "'"; }

}  // namespace

class GrammarBuilder {
 public:
  explicit GrammarBuilder(const JsonSchema& schema) : schema_(schema) {}

  Result<std::shared_ptr<const JsonGrammar>> run(std::vector<SchemaError>* errors_out) {
    if (schema_.use() != SchemaUse::generation)
      errors_.push_back({"", "the schema was compiled for validation only; compile it with SchemaUse::generation"});
    const GrammarNodeId root = errors_.empty() ? build(schema_.root()) : kNoGrammarNode;
    if (errors_.empty()) finish(root);
    if (errors_out) *errors_out = errors_;
    if (!errors_.empty())
      return fail(ErrorCode::unsupported, "JSON Schema cannot be enforced during generation: " + describe(errors_));
    auto g = std::shared_ptr<JsonGrammar>(new JsonGrammar());
    g->schema_ = schema_;
    g->nodes_ = std::move(nodes_);
    g->root_ = root;
    return std::shared_ptr<const JsonGrammar>(std::move(g));
  }

 private:
  void error(const std::string& pointer, std::string message) { errors_.push_back({pointer, std::move(message)}); }

  GrammarNodeId add(GrammarKind kind, const std::string& pointer) {
    GrammarNode n;
    n.kind = kind;
    n.pointer = pointer;
    nodes_.push_back(std::move(n));
    return GrammarNodeId(nodes_.size() - 1);
  }

  GrammarNodeId literal(const char* text) {
    auto it = literals_.find(text);
    if (it != literals_.end()) return it->second;
    const GrammarNodeId id = add(GrammarKind::literal, "");
    nodes_[id].literal = text;
    literals_[text] = id;
    return id;
  }

  GrammarNodeId any() {
    if (any_ != kNoGrammarNode) return any_;
    any_ = add(GrammarKind::alternatives, "");
    std::vector<GrammarNodeId> alts = {literal("null"), literal("true"), literal("false")};
    alts.push_back(add(GrammarKind::number, ""));
    const GrammarNodeId s = add(GrammarKind::string, "");
    nodes_[s].string.dfa = universal_dfa();
    alts.push_back(s);
    const GrammarNodeId a = add(GrammarKind::array, "");
    nodes_[a].array.items = any_;
    alts.push_back(a);
    const GrammarNodeId o = add(GrammarKind::object, "");
    nodes_[o].object.additional = any_;
    alts.push_back(o);
    nodes_[any_].alternatives = std::move(alts);
    return any_;
  }

  std::shared_ptr<const CharDfa> universal_dfa() {
    if (!universal_) universal_ = std::make_shared<const CharDfa>(CharDfa::any_string());
    return universal_;
  }

  // Assertion keywords of a node other than `except`.
  std::vector<std::string> assertions(const SchemaNode& n, std::initializer_list<std::string_view> except) {
    std::vector<std::string> out;
    for (const auto& k : n.keywords)
      if (!non_assertions().contains(k) && std::find(except.begin(), except.end(), k) == except.end()) out.push_back(k);
    return out;
  }

  void not_enforceable(const SchemaNode& n, const std::string& keyword, const std::string& why) {
    error(n.pointer + "/" + keyword, "'" + keyword + "' cannot be enforced during generation" + why);
  }

  void check_keywords(const SchemaNode& n) {
    const std::string after = " (remove it, or validate the output after generation)";
    if (n.multiple_of) not_enforceable(n, "multipleOf", after);
    if (n.unique_items && (!n.max_items || *n.max_items > 1)) not_enforceable(n, "uniqueItems", after);
    if (n.contains != kNoNode) not_enforceable(n, "contains", after);
    if (n.min_properties && *n.min_properties > 0)
      not_enforceable(n, "minProperties", " (list the properties that must appear in 'required')");
    if (n.max_properties) not_enforceable(n, "maxProperties", " (set additionalProperties to false instead)");
    if (!n.pattern_properties.empty()) not_enforceable(n, "patternProperties", after);
    if (n.property_names != kNoNode) not_enforceable(n, "propertyNames", after);
    if (n.not_node != kNoNode) not_enforceable(n, "not", after);
    for (const char* k : {"if", "then", "else"})
      if (n.has(k)) not_enforceable(n, k, after);
    if (!n.all_of.empty() && (n.all_of.size() > 1 || !assertions(n, {"allOf"}).empty()))
      not_enforceable(n, "allOf", " unless it holds a single schema and nothing else asserts beside it (merge the "
                                  "schemas into one)");
  }

  GrammarNodeId build(NodeId sid) {
    if (auto it = memo_.find(sid); it != memo_.end()) return it->second;
    const SchemaNode& n = schema_.node(sid);
    const GrammarNodeId gid = add(GrammarKind::alternatives, n.pointer);
    memo_[sid] = gid;
    std::vector<GrammarNodeId> alts;
    if (n.boolean_schema) {
      if (*n.boolean_schema) alts.push_back(any());
    } else if (n.enum_values || n.const_value) {
      alts = enum_alternatives(sid, n);
    } else {
      check_keywords(n);
      if (n.ref != kNoNode) {
        if (auto others = assertions(n, {"$ref"}); !others.empty())
          error(n.pointer + "/$ref", "$ref beside " + quote(others[0]) +
                                         " cannot be enforced during generation (move the keywords into the "
                                         "referenced schema, or the reference into an anyOf alternative)");
        else
          alts.push_back(build(n.ref));
      } else if (!n.any_of.empty() || !n.one_of.empty()) {
        const bool one = !n.one_of.empty();
        const char* kw = one ? "oneOf" : "anyOf";
        if (!n.any_of.empty() && one) {
          error(n.pointer + "/oneOf", "anyOf and oneOf in one schema cannot be enforced during generation");
        } else if (auto others = assertions(n, {kw}); !others.empty()) {
          error(n.pointer + "/" + kw, std::string(kw) + " beside " + quote(others[0]) +
                                          " cannot be enforced during generation (move the sibling keywords "
                                          "into each alternative)");
        } else {
          for (NodeId c : one ? n.one_of : n.any_of) alts.push_back(build(c));
          if (one) one_of_.push_back(gid);
        }
      } else if (n.all_of.size() == 1) {
        alts.push_back(build(n.all_of[0]));
      } else if (assertions(n, {}).empty()) {
        alts.push_back(any());
      } else {
        alts = typed_alternatives(n);
      }
    }
    nodes_[gid].alternatives = std::move(alts);
    return gid;
  }

  std::vector<GrammarNodeId> typed_alternatives(const SchemaNode& n) {
    std::vector<GrammarNodeId> alts;
    const std::uint8_t t = n.types;
    if (t & kTypeNull) alts.push_back(literal("null"));
    if (t & kTypeBoolean) alts.push_back(literal("true")), alts.push_back(literal("false"));
    if (t & kTypeNumber) alts.push_back(number_node(n, false));
    else if (t & kTypeInteger) alts.push_back(number_node(n, true));
    if (t & kTypeString) alts.push_back(string_node(n));
    if (t & kTypeArray) alts.push_back(array_node(n));
    if (t & kTypeObject) alts.push_back(object_node(n));
    return alts;
  }

  GrammarNodeId number_node(const SchemaNode& n, bool integer) {
    NumberSpec spec;
    spec.integer = integer;
    auto raise_lo = [&](Int128 v) { spec.lo = spec.lo ? std::max(*spec.lo, v) : v; };
    auto lower_hi = [&](Int128 v) { spec.hi = spec.hi ? std::min(*spec.hi, v) : v; };
    if (n.minimum) raise_lo(to_grid(*n.minimum).ceil);
    if (n.exclusive_minimum) raise_lo(to_grid(*n.exclusive_minimum).floor + 1);
    if (n.maximum) lower_hi(to_grid(*n.maximum).floor);
    if (n.exclusive_maximum) lower_hi(to_grid(*n.exclusive_maximum).ceil - 1);
    const GrammarNodeId id = add(GrammarKind::number, n.pointer);
    nodes_[id].number = spec;
    return id;
  }

  GrammarNodeId string_node(const SchemaNode& n) {
    std::shared_ptr<const CharDfa> dfa;
    if (n.pattern && n.format) dfa = std::make_shared<const CharDfa>(CharDfa::intersect(*n.pattern, *n.format));
    else if (n.pattern) dfa = n.pattern;
    else if (n.format) dfa = n.format;
    else dfa = universal_dfa();
    const GrammarNodeId id = add(GrammarKind::string, n.pointer);
    StringSpec& s = nodes_[id].string;
    s.dfa = std::move(dfa);
    s.min_length = n.min_length.value_or(0);
    if (s.min_length >= (1u << 30))  // the table's count is 32-bit; no generation is that long
      error(n.pointer + "/minLength", "minLength " + std::to_string(s.min_length) + " cannot be generated (limit 2^30 code points)");
    if (n.max_length && *n.max_length < (1u << 30)) s.max_length = *n.max_length;  // larger: never reached
    return id;
  }

  GrammarNodeId array_node(const SchemaNode& n) {
    const GrammarNodeId id = add(GrammarKind::array, n.pointer);
    std::vector<GrammarNodeId> prefix;
    for (NodeId p : n.prefix_items) prefix.push_back(build(p));
    const GrammarNodeId items = n.items == kNoNode ? any() : build(n.items);
    ArraySpec& a = nodes_[id].array;
    a.prefix = std::move(prefix);
    a.items = items;
    a.min_items = std::uint32_t(std::min<std::uint64_t>(n.min_items.value_or(0), 0xFFFFFFF0u));
    a.max_items = std::uint32_t(std::min<std::uint64_t>(n.max_items.value_or(0xFFFFFFFFu), 0xFFFFFFFFu));
    return id;
  }

  GrammarNodeId object_node(const SchemaNode& n) {
    const GrammarNodeId id = add(GrammarKind::object, n.pointer);
    std::vector<GrammarProperty> props;
    for (const auto& [name, child] : n.properties) {
      const bool required = std::find(n.required.begin(), n.required.end(), name) != n.required.end();
      props.push_back({name, build(child), required});
    }
    const GrammarNodeId additional = n.additional == kNoNode ? any() : build(n.additional);
    for (const auto& r : n.required) {
      const bool declared = std::any_of(n.properties.begin(), n.properties.end(), [&](auto& p) { return p.first == r; });
      if (!declared) props.push_back({r, additional, true});
    }
    nodes_[id].object.properties = std::move(props);
    nodes_[id].object.additional = additional;
    return id;
  }

  // enum/const: the values that pass the whole schema node, each as a fixed grammar.
  std::vector<GrammarNodeId> enum_alternatives(NodeId sid, const SchemaNode& n) {
    std::vector<Json> values;
    if (n.enum_values) values = *n.enum_values;
    else values.push_back(*n.const_value);
    if (n.enum_values && n.const_value) {
      std::erase_if(values, [&](const Json& v) { return !json_equal(v, *n.const_value); });
    }
    std::vector<Json> kept;
    for (const auto& v : values) {
      if (!schema_.is_valid_at(sid, v)) continue;
      if (std::any_of(kept.begin(), kept.end(), [&](const Json& k) { return json_equal(k, v); })) continue;
      kept.push_back(v);
    }
    std::vector<GrammarNodeId> alts;
    std::vector<std::string> strings;
    const std::string where = n.pointer + (n.enum_values ? "/enum" : "/const");
    for (const auto& v : kept) {
      if (v.is_string()) strings.push_back(v.get<std::string>());
      else alts.push_back(value_node(v, where));
    }
    if (!strings.empty()) alts.push_back(strings_node(strings, where));
    return alts;
  }

  GrammarNodeId strings_node(const std::vector<std::string>& strings, const std::string& pointer) {
    const GrammarNodeId id = add(GrammarKind::string, pointer);
    const std::vector<std::int32_t> labels(strings.size(), 0);
    nodes_[id].string.dfa = std::make_shared<const CharDfa>(CharDfa::literals(strings, labels));
    return id;
  }

  GrammarNodeId value_node(const Json& v, const std::string& pointer) {
    switch (v.type()) {
      case Json::value_t::null: return literal("null");
      case Json::value_t::boolean: return literal(v.get<bool>() ? "true" : "false");
      case Json::value_t::string: return strings_node({v.get<std::string>()}, pointer);
      case Json::value_t::array: {
        std::vector<GrammarNodeId> prefix;
        for (const auto& item : v) prefix.push_back(value_node(item, pointer));
        const GrammarNodeId id = add(GrammarKind::array, pointer);
        ArraySpec& a = nodes_[id].array;
        a.prefix = std::move(prefix);
        a.min_items = a.max_items = std::uint32_t(v.size());
        return id;
      }
      case Json::value_t::object: {
        std::vector<GrammarProperty> props;
        for (const auto& [key, value] : v.items()) props.push_back({key, value_node(value, pointer), true});
        const GrammarNodeId id = add(GrammarKind::object, pointer);
        nodes_[id].object.properties = std::move(props);
        return id;
      }
      default: return number_value_node(v, pointer);
    }
  }

  GrammarNodeId number_value_node(const Json& v, const std::string& pointer) {
    GridValue g{0, 0, false};
    if (v.is_number_integer() || v.is_number_unsigned()) {
      const bool neg = v.is_number_integer() && v.get<std::int64_t>() < 0;
      const std::uint64_t mag = neg ? std::uint64_t(0) - std::uint64_t(v.get<std::int64_t>()) : v.get<std::uint64_t>();
      const Int128 n = Int128(mag) * kUnit;
      g = {neg ? -n : n, neg ? -n : n, true};
    } else {
      g = to_grid(v.get<double>());
    }
    const Int128 mag = g.floor < 0 ? -g.floor : g.floor;
    const Int128 int_part = mag / kUnit, frac = mag % kUnit;
    int frac_digits = 0;
    if (frac != 0) {
      frac_digits = kMaxNumberDigits;
      for (Int128 f = frac; f % 10 == 0; f /= 10) --frac_digits;
    }
    const GrammarNodeId id = add(GrammarKind::number, pointer);
    if (!g.exact || decimal_digits(int_part) + frac_digits > kMaxNumberDigits) {
      error(pointer, "the number " + v.dump() + " cannot be generated: numbers are written without exponent and "
                                                "with at most 15 digits");
      return id;
    }
    nodes_[id].number.lo = nodes_[id].number.hi = g.floor;
    return id;
  }

  // ---- finishing passes ----

  void finish(GrammarNodeId root) {
    for (auto& n : nodes_)
      if (n.kind == GrammarKind::string) string_table(n);
    if (!errors_.empty()) return;
    satisfiability();
    if (!sat_[root]) {
      error("", "the schema accepts no JSON document (its constraints contradict each other, or it only allows "
                "infinitely nested values)");
      return;
    }
    cleanup();
    for (GrammarNodeId i = 0; i < nodes_.size(); ++i) expand(i);
    for (auto& n : nodes_) {
      if (n.kind == GrammarKind::object) object_keys(n);
      if (n.kind == GrammarKind::array) {
        ArraySpec& a = n.array;
        a.count_cap = a.max_items != 0xFFFFFFFFu ? a.max_items
                                                 : std::max<std::uint32_t>(a.min_items, std::uint32_t(a.prefix.size()));
      }
    }
    for (GrammarNodeId g : one_of_) check_disjoint(g);
  }

  void string_table(GrammarNode& n) {
    StringSpec& s = n.string;
    s.universal = is_universal(*s.dfa);
    s.count_cap = std::uint32_t(s.max_length ? *s.max_length : s.min_length);
    if (s.dfa->is_empty() || s.universal || (s.min_length == 0 && !s.max_length)) return;
    const std::uint64_t cap = s.count_cap, states = s.dfa->num_states();
    if (states * (cap + 1) > kMaxStringTable) {
      error(n.pointer, "pattern with minLength/maxLength needs " + std::to_string(states * (cap + 1)) +
                           " table entries (limit " + std::to_string(kMaxStringTable) + "): lower maxLength");
      return;
    }
    // live[r][c]: from state r with c code points, some continuation reaches acceptance
    // within the limits. Without a maximum, counts saturate at the minimum.
    s.live.assign(states * (cap + 1), 0);
    auto at = [&](std::uint64_t r, std::uint64_t c) -> std::uint8_t& { return s.live[r * (cap + 1) + c]; };
    for (std::uint64_t r = 0; r < states; ++r)
      at(r, cap) = s.max_length ? (s.dfa->accepts(std::uint32_t(r)) && cap >= s.min_length) : 1;
    for (std::uint64_t c = cap; c-- > 0;)
      for (std::uint64_t r = 0; r < states; ++r) {
        bool live = s.dfa->accepts(std::uint32_t(r)) && c >= s.min_length;
        for (const auto& e : s.dfa->edges(std::uint32_t(r))) live = live || at(e.target, c + 1);
        at(r, c) = live;
      }
  }

  // Least fixpoint: a node is satisfiable when some finite document matches it.
  void satisfiability() {
    sat_.assign(nodes_.size(), 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (GrammarNodeId i = 0; i < nodes_.size(); ++i) {
        if (sat_[i]) continue;
        if (evaluate(i)) sat_[i] = 1, changed = true;
      }
    }
  }

  std::uint32_t effective_max_items(const ArraySpec& a) const {
    std::uint32_t m = a.max_items;
    for (std::size_t i = 0; i < a.prefix.size(); ++i)
      if (!sat_[a.prefix[i]]) m = std::min<std::uint32_t>(m, std::uint32_t(i));
    if (a.items == kNoGrammarNode || !sat_[a.items]) m = std::min<std::uint32_t>(m, std::uint32_t(a.prefix.size()));
    return m;
  }

  bool evaluate(GrammarNodeId i) const {
    const GrammarNode& n = nodes_[i];
    switch (n.kind) {
      case GrammarKind::literal: return true;
      case GrammarKind::number: return number_live(n.number, kNumStart, 0);
      case GrammarKind::string: return !n.string.dfa->is_empty() && string_live(n.string, 0, 0);
      case GrammarKind::alternatives:
        return std::any_of(n.alternatives.begin(), n.alternatives.end(), [&](GrammarNodeId c) { return sat_[c]; });
      case GrammarKind::array: return n.array.min_items <= effective_max_items(n.array);
      case GrammarKind::object:
        return std::all_of(n.object.properties.begin(), n.object.properties.end(),
                           [&](const GrammarProperty& p) { return !p.required || sat_[p.node]; });
    }
    return false;
  }

  void cleanup() {
    for (auto& n : nodes_) {
      if (n.kind == GrammarKind::alternatives) std::erase_if(n.alternatives, [&](GrammarNodeId c) { return !sat_[c]; });
      if (n.kind == GrammarKind::array) n.array.max_items = effective_max_items(n.array);
      if (n.kind == GrammarKind::object) {
        // A declared property no value can match must stay out of the document: it is
        // not an additional property either.
        for (const auto& p : n.object.properties)
          if (!sat_[p.node]) n.object.forbidden.push_back(p.name);
        std::erase_if(n.object.properties, [&](const GrammarProperty& p) { return !sat_[p.node]; });
        if (n.object.additional != kNoGrammarNode && !sat_[n.object.additional]) n.object.additional = kNoGrammarNode;
      }
    }
  }

  void expand(GrammarNodeId id) {
    GrammarNode& n = nodes_[id];
    n.expansion.clear();
    n.first_bytes.reset();
    std::vector<GrammarNodeId> work = {id};
    std::set<GrammarNodeId> seen = {id};
    while (!work.empty()) {
      const GrammarNodeId g = work.back();
      work.pop_back();
      const GrammarNode& m = nodes_[g];
      if (m.kind != GrammarKind::alternatives) {
        n.expansion.push_back(g);
        continue;
      }
      for (GrammarNodeId c : m.alternatives)
        if (seen.insert(c).second) work.push_back(c);
    }
    std::sort(n.expansion.begin(), n.expansion.end());
    for (GrammarNodeId g : n.expansion) {
      const GrammarNode& m = nodes_[g];
      switch (m.kind) {
        case GrammarKind::literal: n.first_bytes.set(std::uint8_t(m.literal[0])); break;
        case GrammarKind::number:
          n.first_bytes.set('-');
          for (int c = '0'; c <= '9'; ++c) n.first_bytes.set(std::size_t(c));
          break;
        case GrammarKind::string: n.first_bytes.set('"'); break;
        case GrammarKind::array: n.first_bytes.set('['); break;
        case GrammarKind::object: n.first_bytes.set('{'); break;
        case GrammarKind::alternatives: break;
      }
    }
  }

  void object_keys(GrammarNode& n) {
    ObjectSpec& o = n.object;
    const std::size_t count = o.properties.size();
    o.required_from.assign(count + 1, 0);
    for (std::size_t i = count; i-- > 0;) o.required_from[i] = o.required_from[i + 1] || o.properties[i].required;
    o.key_dfas.clear();
    for (std::size_t slot = 0; slot <= count; ++slot)
      o.key_dfas.push_back(std::make_shared<const CharDfa>(make_key_dfa(o, slot, {})));
  }

  // ---- oneOf: enforced as anyOf, so its alternatives must not overlap ----

  void check_disjoint(GrammarNodeId g) {
    const auto& alts = nodes_[g].alternatives;
    for (std::size_t i = 0; i < alts.size(); ++i)
      for (std::size_t j = i + 1; j < alts.size(); ++j)
        if (!disjoint(alts[i], alts[j], 0)) {
          error(nodes_[g].pointer + "/oneOf",
                "oneOf alternatives " + std::to_string(i) + " and " + std::to_string(j) +
                    " may both match one value, which generation cannot rule out (make them differ in type, in "
                    "const/enum values, or in the const value of a required property; or use anyOf)");
          return;
        }
  }

  bool disjoint(GrammarNodeId x, GrammarNodeId y, int depth) const {
    for (GrammarNodeId p : nodes_[x].expansion)
      for (GrammarNodeId q : nodes_[y].expansion)
        if (!disjoint_concrete(p, q, depth)) return false;
    return true;
  }

  bool disjoint_concrete(GrammarNodeId p, GrammarNodeId q, int depth) const {
    const GrammarNode &a = nodes_[p], &b = nodes_[q];
    if ((a.first_bytes & b.first_bytes).none()) return true;
    if (depth > 4 || a.kind != b.kind) return false;
    switch (a.kind) {
      case GrammarKind::literal: return a.literal != b.literal;
      case GrammarKind::number:
        return (a.number.hi && b.number.lo && *a.number.hi < *b.number.lo) ||
               (b.number.hi && a.number.lo && *b.number.hi < *a.number.lo);
      case GrammarKind::string: return CharDfa::intersect(*a.string.dfa, *b.string.dfa).is_empty();
      case GrammarKind::array:
        if (a.array.max_items < b.array.min_items || b.array.max_items < a.array.min_items) return true;
        for (std::size_t i = 0; i < std::min({a.array.prefix.size(), b.array.prefix.size(),
                                              std::size_t(std::min(a.array.min_items, b.array.min_items))});
             ++i)
          if (disjoint(a.array.prefix[i], b.array.prefix[i], depth + 1)) return true;
        return false;
      case GrammarKind::object:
        for (const auto& pa : a.object.properties)
          for (const auto& pb : b.object.properties)
            if (pa.required && pb.required && pa.name == pb.name && disjoint(pa.node, pb.node, depth + 1)) return true;
        return false;
      case GrammarKind::alternatives: return false;
    }
    return false;
  }

  const JsonSchema& schema_;
  std::vector<GrammarNode> nodes_;
  std::map<NodeId, GrammarNodeId> memo_;
  std::map<std::string, GrammarNodeId> literals_;
  GrammarNodeId any_ = kNoGrammarNode;
  std::shared_ptr<const CharDfa> universal_;
  std::vector<GrammarNodeId> one_of_;
  std::vector<std::uint8_t> sat_;
  std::vector<SchemaError> errors_;
};

Result<std::shared_ptr<const JsonGrammar>> JsonGrammar::compile(const JsonSchema& schema,
                                                                std::vector<SchemaError>* errors) {
  GrammarBuilder b(schema);
  return b.run(errors);
}

Result<std::shared_ptr<const JsonGrammar>> JsonGrammar::from_json(const Json& schema, std::vector<SchemaError>* errors) {
  auto s = JsonSchema::compile(schema, SchemaUse::generation, errors);
  if (!s) return std::unexpected(s.error());
  return compile(*s, errors);
}

Result<std::shared_ptr<const JsonGrammar>> JsonGrammar::from_text(std::string_view text,
                                                                  std::vector<SchemaError>* errors) {
  auto s = JsonSchema::parse(text, SchemaUse::generation, errors);
  if (!s) return std::unexpected(s.error());
  return compile(*s, errors);
}

}  // namespace arbor::model

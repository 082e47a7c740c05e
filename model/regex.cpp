#include "model/regex.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <optional>

namespace arbor::model {

namespace {

constexpr std::size_t kMaxNfaStates = 200'000;
constexpr std::size_t kMaxDfaStates = 20'000;
constexpr int kMaxRepeat = 1000;

using Ranges = std::vector<std::pair<std::uint32_t, std::uint32_t>>;  // sorted, disjoint

Ranges normalise(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (auto [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1)
      out.back().second = std::max(out.back().second, hi);
    else
      out.push_back({lo, hi});
  }
  return out;
}

// The scalar values not in `r` (surrogates never match).
Ranges complement(const Ranges& r) {
  Ranges out;
  std::uint32_t lo = 0;
  for (auto [a, b] : r) {
    if (a > lo) out.push_back({lo, a - 1});
    lo = b + 1;
  }
  if (lo <= kMaxCodePoint) out.push_back({lo, kMaxCodePoint});
  return out;
}

Ranges without_surrogates(const Ranges& r) {
  Ranges out;
  for (auto [lo, hi] : r) {
    if (hi < 0xD800 || lo > 0xDFFF) {
      out.push_back({lo, hi});
      continue;
    }
    if (lo < 0xD800) out.push_back({lo, 0xD7FF});
    if (hi > 0xDFFF) out.push_back({0xE000, hi});
  }
  return out;
}

const Ranges& digit_ranges() {
  static const Ranges r = {{'0', '9'}};
  return r;
}
const Ranges& word_ranges() {
  static const Ranges r = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  return r;
}
const Ranges& space_ranges() {  // ECMA-262 WhiteSpace + LineTerminator
  static const Ranges r = normalise({{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                                     {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000},
                                     {0xFEFF, 0xFEFF}});
  return r;
}
const Ranges& dot_ranges() {  // everything but line terminators
  static const Ranges r = complement({{0x0A, 0x0A}, {0x0D, 0x0D}, {0x2028, 0x2029}});
  return r;
}

struct Ast {
  enum class Kind { set, concat, alt, repeat } kind;
  Ranges set;
  std::vector<std::unique_ptr<Ast>> children;
  int min = 0, max = -1;  // repeat; max -1: unbounded
};
using AstPtr = std::unique_ptr<Ast>;

AstPtr make(Ast::Kind kind) {
  auto a = std::make_unique<Ast>();
  a->kind = kind;
  return a;
}
AstPtr make_set(Ranges r) {
  auto a = make(Ast::Kind::set);
  a->set = without_surrogates(normalise(std::move(r)));
  return a;
}

class Parser {
 public:
  explicit Parser(std::string_view pattern) : text_(pattern) {}

  Result<AstPtr> parse() {
    if (!decode_utf8(text_, cps_)) return fail(ErrorCode::invalid_argument, "pattern is not valid UTF-8");
    auto top = make(Ast::Kind::alt);
    for (;;) {
      bool anchored_start = false, anchored_end = false;
      if (peek() == '^') anchored_start = true, ++pos_;
      auto seq = parse_concat(/*top_level=*/true, anchored_end);
      if (!seq) return std::unexpected(seq.error());
      // Search semantics: an unanchored side may be surrounded by anything.
      auto wrapped = make(Ast::Kind::concat);
      if (!anchored_start) wrapped->children.push_back(any_star());
      wrapped->children.push_back(std::move(*seq));
      if (!anchored_end) wrapped->children.push_back(any_star());
      top->children.push_back(std::move(wrapped));
      if (pos_ >= cps_.size()) break;
      if (peek() == '|') {
        ++pos_;
        continue;
      }
      return error("unbalanced ')'");
    }
    return top;
  }

 private:
  static AstPtr any_star() {
    auto r = make(Ast::Kind::repeat);
    r->children.push_back(make_set({{0, kMaxCodePoint}}));
    return r;
  }

  std::uint32_t peek(std::size_t ahead = 0) const {
    return pos_ + ahead < cps_.size() ? cps_[pos_ + ahead] : 0xFFFFFFFFu;
  }
  bool at_end() const { return pos_ >= cps_.size(); }

  std::unexpected<Error> error(const std::string& what) const {
    return fail(ErrorCode::unsupported, what + " at offset " + std::to_string(pos_) + " of pattern '" +
                                            std::string(text_) + "'");
  }

  Result<AstPtr> parse_alternation() {
    auto alt = make(Ast::Kind::alt);
    bool unused = false;
    for (;;) {
      auto seq = parse_concat(false, unused);
      if (!seq) return seq;
      alt->children.push_back(std::move(*seq));
      if (peek() != '|') break;
      ++pos_;
    }
    return alt;
  }

  Result<AstPtr> parse_concat(bool top_level, bool& anchored_end) {
    auto seq = make(Ast::Kind::concat);
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        const bool last = pos_ + 1 == cps_.size() || peek(1) == '|';
        if (!top_level || !last) return error("'$' anchor that does not end a top-level alternative");
        ++pos_;
        anchored_end = true;
        break;
      }
      if (peek() == '^') return error("'^' anchor that does not start a top-level alternative");
      auto atom = parse_atom();
      if (!atom) return atom;
      auto quantified = parse_quantifier(std::move(*atom));
      if (!quantified) return quantified;
      seq->children.push_back(std::move(*quantified));
    }
    if (top_level && peek() == ')') return error("unbalanced ')'");
    return seq;
  }

  Result<AstPtr> parse_quantifier(AstPtr atom) {
    int min = 0, max = -1;
    const std::uint32_t c = peek();
    if (c == '*') {
      ++pos_;
    } else if (c == '+') {
      min = 1, ++pos_;
    } else if (c == '?') {
      max = 1, ++pos_;
    } else if (c == '{') {
      auto braces = parse_braces();
      if (!braces) return atom;  // not a quantifier: '{' stays a literal (Annex B)
      std::tie(min, max) = *braces;
      if (min > kMaxRepeat || max > kMaxRepeat)
        return error("repetition count above " + std::to_string(kMaxRepeat));
      if (max >= 0 && max < min) return error("repetition {m,n} with n < m");
    } else {
      return atom;
    }
    if (peek() == '?') ++pos_;  // lazy: same language
    if (peek() == '*' || peek() == '+' || peek() == '?' || peek() == '{')
      if (peek() != '{' || parse_braces_peek()) return error("nothing to repeat");
    auto r = make(Ast::Kind::repeat);
    r->min = min, r->max = max;
    r->children.push_back(std::move(atom));
    return r;
  }

  bool parse_braces_peek() {
    const std::size_t saved = pos_;
    const bool ok = parse_braces().has_value();
    pos_ = saved;
    return ok;
  }

  std::optional<std::pair<int, int>> parse_braces() {
    const std::size_t saved = pos_;
    ++pos_;  // '{'
    auto number = [&]() -> std::optional<int> {
      if (!(peek() >= '0' && peek() <= '9')) return std::nullopt;
      long v = 0;
      while (peek() >= '0' && peek() <= '9') {
        v = std::min<long>(v * 10 + long(peek() - '0'), 1'000'000);
        ++pos_;
      }
      return int(v);
    };
    auto lo = number();
    if (!lo) {
      pos_ = saved;
      return std::nullopt;
    }
    int hi = *lo;
    if (peek() == ',') {
      ++pos_;
      auto h = number();
      hi = h ? *h : -1;
    }
    if (peek() != '}') {
      pos_ = saved;
      return std::nullopt;
    }
    ++pos_;
    return std::pair{*lo, hi};
  }

  Result<AstPtr> parse_atom() {
    const std::uint32_t c = peek();
    if (c == '(') {
      ++pos_;
      if (peek() == '?') {
        if (peek(1) == ':') {
          pos_ += 2;
        } else if (peek(1) == '<' && peek(2) != '=' && peek(2) != '!') {
          pos_ += 2;
          while (!at_end() && peek() != '>') ++pos_;
          if (at_end()) return error("unterminated group name");
          ++pos_;
        } else {
          return error("lookaround or group modifier '(?'");
        }
      }
      auto inner = parse_alternation();
      if (!inner) return inner;
      if (peek() != ')') return error("missing ')'");
      ++pos_;
      return inner;
    }
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      return make_set(dot_ranges());
    }
    if (c == '\\') {
      ++pos_;
      auto r = parse_escape(/*in_class=*/false);
      if (!r) return std::unexpected(r.error());
      return make_set(std::move(*r));
    }
    if (c == '*' || c == '+' || c == '?') return error("nothing to repeat");
    if (c == '{' && parse_braces_peek()) return error("nothing to repeat");
    ++pos_;
    return make_set({{c, c}});
  }

  Result<AstPtr> parse_class() {
    ++pos_;  // '['
    bool negated = false;
    if (peek() == '^') negated = true, ++pos_;
    Ranges ranges;
    while (!at_end() && peek() != ']') {  // ECMA: "[]" is the empty class
      auto lo = class_atom();
      if (!lo) return std::unexpected(lo.error());
      if (peek() == '-' && peek(1) != ']' && peek(1) != 0xFFFFFFFFu) {
        ++pos_;
        auto hi = class_atom();
        if (!hi) return std::unexpected(hi.error());
        if (lo->size() != 1 || hi->size() != 1 || lo->front().first != lo->front().second ||
            hi->front().first != hi->front().second)
          return error("character class range with a class escape as an end");
        if (hi->front().first < lo->front().first) return error("character class range out of order");
        ranges.push_back({lo->front().first, hi->front().first});
      } else {
        ranges.insert(ranges.end(), lo->begin(), lo->end());
      }
    }
    if (peek() != ']') return error("missing ']'");
    ++pos_;
    Ranges r = normalise(std::move(ranges));
    if (negated) r = complement(r);
    return make_set(std::move(r));
  }

  Result<Ranges> class_atom() {
    const std::uint32_t c = peek();
    ++pos_;
    if (c != '\\') return Ranges{{c, c}};
    return parse_escape(/*in_class=*/true);
  }

  std::optional<std::uint32_t> hex_digits(int n) {
    std::uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      const std::uint32_t c = peek(std::size_t(i));
      int d = -1;
      if (c >= '0' && c <= '9') d = int(c - '0');
      else if (c >= 'a' && c <= 'f') d = int(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') d = int(c - 'A' + 10);
      if (d < 0) return std::nullopt;
      v = v * 16 + std::uint32_t(d);
    }
    pos_ += std::size_t(n);
    return v;
  }

  // After the backslash.
  Result<Ranges> parse_escape(bool in_class) {
    if (at_end()) return error("pattern ends with '\\'");
    const std::uint32_t c = peek();
    ++pos_;
    auto one = [](std::uint32_t v) { return Ranges{{v, v}}; };
    switch (c) {
      case 'd': return digit_ranges();
      case 'D': return complement(digit_ranges());
      case 'w': return word_ranges();
      case 'W': return complement(word_ranges());
      case 's': return space_ranges();
      case 'S': return complement(space_ranges());
      case 't': return one(0x09);
      case 'n': return one(0x0A);
      case 'r': return one(0x0D);
      case 'f': return one(0x0C);
      case 'v': return one(0x0B);
      case 'b':
        if (in_class) return one(0x08);
        --pos_;
        return error("word boundary '\\b'");
      case 'B': --pos_; return error("word boundary '\\B'");
      case 'p': case 'P': --pos_; return error("Unicode property escape '\\p{..}'");
      case 'k': --pos_; return error("named backreference '\\k'");
      case 'c': {
        const std::uint32_t l = peek();
        if ((l >= 'a' && l <= 'z') || (l >= 'A' && l <= 'Z')) {
          ++pos_;
          return one(l % 32);
        }
        return one('\\');  // Annex B: "\c" not followed by a letter is literal
      }
      case 'x': {
        if (auto v = hex_digits(2)) return one(*v);
        return one('x');
      }
      case 'u': {
        if (peek() == '{') {
          const std::size_t saved = pos_;
          ++pos_;
          std::uint32_t v = 0;
          int n = 0;
          while (n < 8) {
            auto d = hex_digits(1);
            if (!d) break;
            v = v * 16 + *d, ++n;
          }
          if (n > 0 && peek() == '}' && v <= kMaxCodePoint) {
            ++pos_;
            return one(v);
          }
          pos_ = saved;
          return one('u');
        }
        auto v = hex_digits(4);
        if (!v) return one('u');
        if (*v >= 0xD800 && *v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
          const std::size_t saved = pos_;
          pos_ += 2;
          auto low = hex_digits(4);
          if (low && *low >= 0xDC00 && *low <= 0xDFFF) return one(0x10000 + ((*v - 0xD800) << 10) + (*low - 0xDC00));
          pos_ = saved;
        }
        return one(*v);  // a lone surrogate never matches (removed by make_set)
      }
      case '0':
        if (!(peek() >= '0' && peek() <= '9')) return one(0);
        --pos_;
        return error("octal escape");
      default:
        if (c >= '1' && c <= '9') {
          if (in_class) return one(c);
          --pos_;
          return error("backreference '\\" + std::string(1, char(c)) + "'");
        }
        return one(c);  // identity escape: \. \* \/ \- ...
    }
  }

  std::string_view text_;
  std::vector<std::uint32_t> cps_;
  std::size_t pos_ = 0;
};

// Thompson NFA with code point range edges and epsilon edges.
struct Nfa {
  struct State {
    std::vector<std::uint32_t> eps;
    std::vector<std::pair<std::pair<std::uint32_t, std::uint32_t>, std::uint32_t>> edges;
  };
  std::vector<State> states;
  bool too_big = false;

  std::uint32_t add() {
    if (states.size() >= kMaxNfaStates) too_big = true;
    states.emplace_back();
    return std::uint32_t(states.size() - 1);
  }

  // Builds `a` between fresh states; returns {start, end}.
  std::pair<std::uint32_t, std::uint32_t> build(const Ast& a) {
    if (too_big) {
      const auto s = add();
      return {s, s};
    }
    switch (a.kind) {
      case Ast::Kind::set: {
        const auto s = add(), e = add();
        for (auto r : a.set) states[s].edges.push_back({r, e});
        return {s, e};
      }
      case Ast::Kind::concat: {
        const auto s = add();
        auto cur = s;
        for (const auto& c : a.children) {
          auto [cs, ce] = build(*c);
          states[cur].eps.push_back(cs);
          cur = ce;
        }
        return {s, cur};
      }
      case Ast::Kind::alt: {
        const auto s = add(), e = add();
        for (const auto& c : a.children) {
          auto [cs, ce] = build(*c);
          states[s].eps.push_back(cs);
          states[ce].eps.push_back(e);
        }
        return {s, e};
      }
      case Ast::Kind::repeat: {
        const auto s = add();
        auto cur = s;
        for (int i = 0; i < a.min; ++i) {
          auto [cs, ce] = build(*a.children[0]);
          states[cur].eps.push_back(cs);
          cur = ce;
        }
        if (a.max < 0) {
          auto [cs, ce] = build(*a.children[0]);
          const auto e = add();
          states[cur].eps.push_back(cs);
          states[cur].eps.push_back(e);
          states[ce].eps.push_back(cs);
          states[ce].eps.push_back(e);
          return {s, e};
        }
        const auto e = add();
        for (int i = a.min; i < a.max; ++i) {
          auto [cs, ce] = build(*a.children[0]);
          states[cur].eps.push_back(e);
          states[cur].eps.push_back(cs);
          cur = ce;
        }
        states[cur].eps.push_back(e);
        return {s, e};
      }
    }
    return {0, 0};
  }

  // Epsilon closure, sorted. `mark_` stamps visited states with a per-call number.
  void close(std::vector<std::uint32_t>& set) {
    if (mark_.size() != states.size()) mark_.assign(states.size(), 0);
    ++stamp_;
    for (auto s : set) mark_[s] = stamp_;
    for (std::size_t i = 0; i < set.size(); ++i)
      for (auto t : states[set[i]].eps)
        if (mark_[t] != stamp_) mark_[t] = stamp_, set.push_back(t);
    std::sort(set.begin(), set.end());
  }
  std::vector<std::uint32_t> mark_;
  std::uint32_t stamp_ = 0;
};

}  // namespace

Result<CharDfa> compile_pattern(std::string_view pattern) {
  Parser parser(pattern);
  auto ast = parser.parse();
  if (!ast) return std::unexpected(ast.error());
  Nfa nfa;
  const auto [start, final_state] = nfa.build(**ast);
  if (nfa.too_big)
    return fail(ErrorCode::unsupported, "pattern '" + std::string(pattern) +
                                            "' is too large to compile (reduce its repetition counts)");
  // Subset construction over elementary code point intervals.
  CharDfa dfa;
  std::map<std::vector<std::uint32_t>, std::uint32_t> ids;
  std::vector<std::vector<std::uint32_t>> work;
  auto id_of = [&](std::vector<std::uint32_t> set) {
    auto [it, fresh] = ids.emplace(set, 0);
    if (fresh) {
      const bool accepting = std::binary_search(set.begin(), set.end(), final_state);
      it->second = dfa.add_state(accepting ? 0 : CharDfa::kReject);
      work.push_back(std::move(set));
    }
    return it->second;
  };
  std::vector<std::uint32_t> initial = {start};
  nfa.close(initial);
  id_of(std::move(initial));
  for (std::size_t i = 0; i < work.size(); ++i) {
    if (work.size() > kMaxDfaStates)
      return fail(ErrorCode::unsupported, "pattern '" + std::string(pattern) + "' needs more than " +
                                              std::to_string(kMaxDfaStates) + " automaton states");
    const auto set = work[i];
    std::vector<std::uint32_t> points;
    for (auto s : set)
      for (const auto& [r, t] : nfa.states[s].edges) points.push_back(r.first), points.push_back(r.second + 1);
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end()), points.end());
    for (std::size_t p = 0; p + 1 < points.size(); ++p) {
      const std::uint32_t lo = points[p], hi = points[p + 1] - 1;
      std::vector<std::uint32_t> target;
      for (auto s : set)
        for (const auto& [r, t] : nfa.states[s].edges)
          if (r.first <= lo && hi <= r.second) target.push_back(t);
      if (target.empty()) continue;
      std::sort(target.begin(), target.end());
      target.erase(std::unique(target.begin(), target.end()), target.end());
      nfa.close(target);
      dfa.add_edge(std::uint32_t(i), lo, hi, id_of(std::move(target)));
    }
  }
  dfa.finish();
  return dfa;
}

}  // namespace arbor::model

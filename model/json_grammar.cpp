// The byte-level automaton: how each kind of frame consumes a byte.
#include "model/json_grammar.hpp"

#include <algorithm>
#include <cassert>

#include "model/json_grammar_internal.hpp"
#include "model/unicode.hpp"

namespace arbor::model {

namespace {

using namespace grammar_detail;

bool is_digit(std::uint8_t b) { return b >= '0' && b <= '9'; }

int hex_value(std::uint8_t b) {
  if (b >= '0' && b <= '9') return b - '0';
  if (b >= 'a' && b <= 'f') return b - 'a' + 10;
  if (b >= 'A' && b <= 'F') return b - 'A' + 10;
  return -1;
}

// ---- strings: a lexer over bytes that yields code points to a CharDfa ----

enum LexKind : std::uint32_t { kLexNormal = 0, kLexEscape, kLexHex, kLexUtf8 };

constexpr std::uint32_t lex_kind(std::uint32_t lex) { return lex & 15; }
constexpr std::uint32_t lex_digits(std::uint32_t lex) { return (lex >> 4) & 3; }
constexpr std::uint32_t make_hex(std::uint32_t digits, std::uint32_t value) {
  return kLexHex | (digits << 4) | (value << 8);
}
// UTF-8: remaining continuation bytes, total length, value so far.
constexpr std::uint32_t make_utf8(std::uint32_t remaining, std::uint32_t length, std::uint32_t value) {
  return kLexUtf8 | (remaining << 4) | (length << 6) | (value << 8);
}

// The generation form writes \u escapes only for the control characters U+0000..U+001F
// (which have no other spelling but a short escape); every other code point is raw
// UTF-8. A model given the choice spells ordinary letters as \u escapes, which costs six
// tokens a letter and derails small models.
constexpr std::uint32_t kMaxEscapedCodePoint = 0x1F;

struct Interval {
  std::uint32_t lo, hi;
};
constexpr int kMaxIntervals = 4;

// The code points a partial lexer state can still complete to.
int lex_intervals(std::uint32_t lex, Interval out[kMaxIntervals]) {
  const std::uint32_t digits = lex_digits(lex);
  switch (lex_kind(lex)) {
    case kLexEscape:  // \u00XX and \b \f \n \r \t; \" \\ \/
      out[0] = {0, kMaxEscapedCodePoint};
      out[1] = {'"', '"'};
      out[2] = {'/', '/'};
      out[3] = {'\\', '\\'};
      return 4;
    case kLexHex: {
      const std::uint32_t value = (lex >> 8) & 0xFFF, span = 1u << (4 * (4 - digits));
      if (value * span > kMaxEscapedCodePoint) return 0;
      out[0] = {value * span, std::min(value * span + span - 1, kMaxEscapedCodePoint)};
      return 1;
    }
    case kLexUtf8: {
      const std::uint32_t remaining = (lex >> 4) & 3, length = (lex >> 6) & 3;
      // length 0 stands for 4 (two bits).
      const std::uint32_t value = lex >> 8, shift = 6 * remaining;
      const std::uint32_t min = length == 2 ? 0x80u : length == 3 ? 0x800u : 0x10000u;
      const std::uint32_t max = length == 2 ? 0x7FFu : length == 3 ? 0xFFFFu : kMaxCodePoint;
      const std::uint32_t lo = std::max(value << shift, min);
      const std::uint32_t hi = std::min((value << shift) | ((1u << shift) - 1), max);
      if (lo > hi) return 0;
      int n = 0;
      if (lo < 0xD800) out[n++] = {lo, std::min<std::uint32_t>(hi, 0xD7FF)};
      if (hi > 0xDFFF) out[n++] = {std::max<std::uint32_t>(lo, 0xE000), hi};
      return n;
    }
    default: return 0;
  }
}

enum class Lex { dead, ok, closed };

// A string being lexed: its character automaton and (optional) length limits.
struct StringLexer {
  const CharDfa& dfa;
  const StringSpec* lengths;  // nullptr: none (object keys)

  bool live(std::uint32_t state, std::uint32_t count) const {
    return lengths ? string_live(*lengths, state, count) : true;
  }
  // The count after one more code point, or nothing when the maximum is reached.
  std::optional<std::uint32_t> next_count(std::uint32_t count) const {
    if (!lengths) return 0;
    if (lengths->max_length && count + 1 > *lengths->max_length) return std::nullopt;
    return std::min<std::uint32_t>(count + 1, lengths->count_cap);
  }
  bool can_close(std::uint32_t state, std::uint32_t count) const {
    return dfa.accepts(state) && (!lengths || count >= lengths->min_length);
  }
  // Some code point in `intervals` leads to a live state.
  bool any_live(std::uint32_t state, std::uint32_t count, const Interval* intervals, int n) const {
    const auto c = next_count(count);
    if (!c) return false;
    for (const auto& e : dfa.edges(state))
      for (int i = 0; i < n; ++i)
        if (e.lo <= intervals[i].hi && intervals[i].lo <= e.hi && live(e.target, *c)) return true;
    return false;
  }
  bool partial_live(std::uint32_t state, std::uint32_t count, std::uint32_t lex) const {
    Interval in[kMaxIntervals];
    const int n = lex_intervals(lex, in);
    return any_live(state, count, in, n);
  }
  Lex code_point(std::uint32_t& state, std::uint32_t& lex, std::uint32_t& count, std::uint32_t cp) const {
    const std::uint32_t next = dfa.next(state, cp);
    if (next == kDeadState) return Lex::dead;
    const auto c = next_count(count);
    if (!c || !live(next, *c)) return Lex::dead;
    state = next, count = *c, lex = kLexNormal;
    return Lex::ok;
  }
  Lex partial(std::uint32_t state, std::uint32_t count, std::uint32_t& lex, std::uint32_t next_lex) const {
    if (!partial_live(state, count, next_lex)) return Lex::dead;
    lex = next_lex;
    return Lex::ok;
  }

  Lex byte(std::uint32_t& state, std::uint32_t& lex, std::uint32_t& count, std::uint8_t b) const {
    switch (lex_kind(lex)) {
      case kLexNormal:
        if (b == '"') return can_close(state, count) ? Lex::closed : Lex::dead;
        if (b == '\\') return partial(state, count, lex, kLexEscape);
        if (b < 0x20) return Lex::dead;
        if (b < 0x80) return code_point(state, lex, count, b);
        if (b >= 0xC2 && b <= 0xDF) return partial(state, count, lex, make_utf8(1, 2, b & 0x1F));
        if (b >= 0xE0 && b <= 0xEF) return partial(state, count, lex, make_utf8(2, 3, b & 0x0F));
        if (b >= 0xF0 && b <= 0xF4) return partial(state, count, lex, make_utf8(3, 0, b & 0x07));
        return Lex::dead;
      case kLexUtf8: {
        if ((b & 0xC0) != 0x80) return Lex::dead;
        const std::uint32_t remaining = ((lex >> 4) & 3) - 1, length = (lex >> 6) & 3;
        const std::uint32_t value = ((lex >> 8) << 6) | (b & 0x3F);
        const std::uint32_t next = make_utf8(remaining, length, value);
        Interval in[kMaxIntervals];
        if (lex_intervals(next, in) == 0) return Lex::dead;  // overlong, surrogate or too large
        if (remaining == 0) return code_point(state, lex, count, value);
        return partial(state, count, lex, next);
      }
      case kLexEscape: {
        std::uint32_t cp;
        switch (b) {
          case '"': cp = '"'; break;
          case '\\': cp = '\\'; break;
          case '/': cp = '/'; break;
          case 'b': cp = 0x08; break;
          case 'f': cp = 0x0C; break;
          case 'n': cp = 0x0A; break;
          case 'r': cp = 0x0D; break;
          case 't': cp = 0x09; break;
          case 'u': return partial(state, count, lex, make_hex(0, 0));
          default: return Lex::dead;
        }
        return code_point(state, lex, count, cp);
      }
      case kLexHex: {
        const int h = hex_value(b);
        if (h < 0) return Lex::dead;
        const std::uint32_t digits = lex_digits(lex) + 1, value = ((lex >> 8) & 0xFFF) * 16 + std::uint32_t(h);
        if (digits < 4) return partial(state, count, lex, make_hex(digits, value));
        if (value > kMaxEscapedCodePoint) return Lex::dead;
        return code_point(state, lex, count, value);
      }
      default: return Lex::dead;
    }
  }
};

}  // namespace

// ---- shared helpers (json_grammar_internal.hpp) ----

namespace grammar_detail {

bool string_live(const StringSpec& spec, std::uint32_t state, std::uint32_t count) {
  if (!spec.live.empty()) return spec.live[std::size_t(state) * (spec.count_cap + 1) + count];
  if (spec.universal) return !spec.max_length || (count <= *spec.max_length && spec.min_length <= *spec.max_length);
  return true;  // no lengths: every state of a trimmed DFA is live
}

CharDfa make_key_dfa(const ObjectSpec& o, std::size_t slot, const std::vector<std::string>& written) {
  // Candidates: the properties from `slot` up to and including the next required one;
  // other declared names (and forbidden ones, and keys already written) never close.
  const std::size_t count = o.properties.size();
  std::vector<std::string> names;
  for (const auto& p : o.properties) names.push_back(p.name);
  names.insert(names.end(), o.forbidden.begin(), o.forbidden.end());
  names.insert(names.end(), written.begin(), written.end());
  std::vector<std::int32_t> labels(names.size(), CharDfa::kReject);
  for (std::size_t i = slot; i < count; ++i) {
    labels[i] = std::int32_t(i);
    if (o.properties[i].required) break;
  }
  const bool other = o.additional != kNoGrammarNode && !o.required_from[slot];
  return CharDfa::literals_or_other(names, labels, other ? kAdditionalKeyLabel : CharDfa::kReject);
}

StringStep string_byte(const StringSpec& spec, std::uint32_t& state, std::uint32_t& lex, std::uint32_t& count,
                       std::uint8_t byte) {
  const StringLexer lexer{*spec.dfa, &spec};
  switch (lexer.byte(state, lex, count, byte)) {
    case Lex::dead: return StringStep::dead;
    case Lex::ok: return StringStep::ok;
    case Lex::closed: return StringStep::closed;
  }
  return StringStep::dead;
}

StringStep string_byte_unbounded(const CharDfa& dfa, std::uint32_t& state, std::uint32_t& lex, std::uint8_t byte) {
  const StringLexer lexer{dfa, nullptr};
  std::uint32_t count = 0;
  switch (lexer.byte(state, lex, count, byte)) {
    case Lex::dead: return StringStep::dead;
    case Lex::ok: return StringStep::ok;
    case Lex::closed: return StringStep::closed;
  }
  return StringStep::dead;
}

namespace {

constexpr Int128 pow10(int n) {
  Int128 v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

Int128 floor_div(Int128 a, Int128 b) {  // b > 0
  Int128 q = a / b;
  if (a % b != 0 && a < 0) --q;
  return q;
}

// Some multiple of `step` in [a, b] also lies in [lo, hi] (absent: unbounded).
bool grid_meets(Int128 a, Int128 b, Int128 step, const std::optional<Int128>& lo, const std::optional<Int128>& hi) {
  Int128 x = a;
  if (lo && *lo > x) x = -floor_div(-*lo, step) * step;  // ceil to the grid
  Int128 y = b;
  if (hi && *hi < y) y = *hi;
  return x <= y;
}

}  // namespace

bool number_live(const NumberSpec& spec, std::uint32_t a, std::uint64_t digits) {
  if (!spec.lo && !spec.hi) return true;
  const std::uint32_t phase = a & 7;
  if (phase == kNumStart || phase == kNumMinus) {
    Frame f;
    f.a = a;
    f.b = std::uint32_t(digits), f.c = std::uint32_t(digits >> 32);
    for (std::uint8_t b : {'-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9'}) {
      Frame g = f;
      if (number_transition(spec, g, b)) return true;
    }
    return false;
  }
  const bool negative = a & kNumNegative, zero_int = a & kNumZeroInt;
  const int k = int((a >> 4) & 15), f = int((a >> 8) & 15);
  const int used = (zero_int ? 0 : k) + f, remaining = kMaxNumberDigits - used;
  // Magnitude bounds: value = -M for negative numbers.
  std::optional<Int128> lo = spec.lo, hi = spec.hi;
  if (negative) {
    lo = spec.hi ? std::optional<Int128>(-*spec.hi) : std::nullopt;
    hi = spec.lo ? std::optional<Int128>(-*spec.lo) : std::nullopt;
  }
  const Int128 unit = pow10(kMaxNumberDigits), d = Int128(digits);
  switch (phase) {
    case kNumZero:
      return spec.integer ? grid_meets(0, 0, unit, lo, hi) : grid_meets(0, unit - 1, 1, lo, hi);
    case kNumInt:
      for (int j = 0; j <= remaining; ++j) {
        const Int128 base = d * pow10(j);
        if (spec.integer) {
          if (grid_meets(base * unit, (base + pow10(j) - 1) * unit, unit, lo, hi)) return true;
        } else {
          const Int128 step = pow10(kMaxNumberDigits - (remaining - j));
          if (grid_meets(base * unit, (base + pow10(j)) * unit - step, step, lo, hi)) return true;
        }
      }
      return false;
    case kNumDot:
    case kNumFrac: {
      const Int128 base = d * pow10(kMaxNumberDigits - f);
      if (spec.integer) return grid_meets(base, base, unit, lo, hi);
      const int extra = phase == kNumDot ? std::max(remaining, 0) : remaining;
      if (phase == kNumDot && extra == 0) return false;
      const Int128 step = pow10(kMaxNumberDigits - f - extra);
      return grid_meets(base, base + pow10(kMaxNumberDigits - f) - step, step, lo, hi);
    }
    default: return false;
  }
}

bool number_value_in_range(const NumberSpec& spec, std::uint32_t a, std::uint64_t digits) {
  if (!spec.lo && !spec.hi) return true;
  const int f = int((a >> 8) & 15);
  Int128 v = Int128(digits) * pow10(kMaxNumberDigits - f);
  if (a & kNumNegative) v = -v;
  return (!spec.lo || v >= *spec.lo) && (!spec.hi || v <= *spec.hi);
}

bool number_transition(const NumberSpec& spec, Frame& fr, std::uint8_t b) {
  std::uint32_t a = fr.a;
  std::uint64_t digits = std::uint64_t(fr.b) | (std::uint64_t(fr.c) << 32);
  const std::uint32_t phase = a & 7;
  const bool zero_int = a & kNumZeroInt;
  const std::uint32_t k = (a >> 4) & 15, f = (a >> 8) & 15;
  const std::uint32_t used = (zero_int ? 0 : k) + f;
  auto set_phase = [&](std::uint32_t p) { a = (a & ~7u) | p; };
  switch (phase) {
    case kNumStart:
      if (b == '-') {
        set_phase(kNumMinus);
        a |= kNumNegative;
        break;
      }
      [[fallthrough]];
    case kNumMinus:
      if (b == '0') {
        set_phase(kNumZero);
        a |= kNumZeroInt | (1u << 4);
      } else if (is_digit(b)) {
        set_phase(kNumInt);
        a = (a & ~(15u << 4)) | (1u << 4);
        digits = std::uint64_t(b - '0');
      } else {
        return false;
      }
      break;
    case kNumZero:
    case kNumInt:
      if (b == '.') {
        if (used >= std::uint32_t(kMaxNumberDigits)) return false;
        set_phase(kNumDot);
      } else if (phase == kNumInt && is_digit(b)) {
        if (used >= std::uint32_t(kMaxNumberDigits)) return false;
        a = (a & ~(15u << 4)) | ((k + 1) << 4);
        digits = digits * 10 + std::uint64_t(b - '0');
      } else {
        return false;
      }
      break;
    case kNumDot:
    case kNumFrac:
      if (!is_digit(b) || used >= std::uint32_t(kMaxNumberDigits)) return false;
      if (spec.integer && b != '0') return false;
      set_phase(kNumFrac);
      a = (a & ~(15u << 8)) | ((f + 1) << 8);
      digits = digits * 10 + std::uint64_t(b - '0');
      break;
    default: return false;
  }
  if (!number_live(spec, a, digits)) return false;
  fr.a = a;
  fr.b = std::uint32_t(digits), fr.c = std::uint32_t(digits >> 32);
  return true;
}

}  // namespace grammar_detail

// ---- MatchState ----

void MatchState::canonicalise() {
  if (ends_.size() <= 1) return;
  std::vector<std::vector<Frame>> stacks;
  stacks.reserve(ends_.size());
  for (std::size_t i = 0; i < ends_.size(); ++i) {
    auto s = stack(i);
    stacks.emplace_back(s.begin(), s.end());
  }
  auto key = [](const Frame& f) { return std::tie(f.node, f.a, f.b, f.c, f.d, f.x0, f.x1, f.x2); };
  auto less = [&](const std::vector<Frame>& x, const std::vector<Frame>& y) {
    return std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end(),
                                        [&](const Frame& p, const Frame& q) { return key(p) < key(q); });
  };
  auto equal = [&](const std::vector<Frame>& x, const std::vector<Frame>& y) {
    return std::equal(x.begin(), x.end(), y.begin(), y.end(),
                      [&](const Frame& p, const Frame& q) { return key(p) == key(q); });
  };
  std::sort(stacks.begin(), stacks.end(), less);
  stacks.erase(std::unique(stacks.begin(), stacks.end(), equal), stacks.end());
  clear();
  for (const auto& s : stacks) add(s);
}

bool MatchState::remove_empty_stacks() {
  std::size_t kept = 0;
  bool removed = false;
  for (std::size_t i = 0; i < ends_.size(); ++i) {
    const std::uint32_t begin = i ? ends_[i - 1] : 0;
    if (ends_[i] == begin) {
      removed = true;
      continue;
    }
    ends_[kept++] = ends_[i];
  }
  ends_.resize(kept);
  return removed;
}

void MatchState::identity(std::vector<std::uint32_t>& out) const {
  out.clear();
  for (std::size_t i = 0; i < ends_.size(); ++i) {
    for (const Frame& f : stack(i)) out.insert(out.end(), {f.node, f.a, f.b, f.c, f.d});
    out.push_back(0xFFFFFFFFu);  // stack separator (no frame starts with this node id)
  }
}

// ---- frames ----

bool JsonGrammar::can_finish(const Frame& f) const {
  const GrammarNode& n = nodes_[f.node];
  if (n.kind != GrammarKind::number) return false;
  const std::uint32_t phase = f.a & 7;
  if (phase != kNumZero && phase != kNumInt && phase != kNumFrac) return false;
  return number_value_in_range(n.number, f.a, std::uint64_t(f.b) | (std::uint64_t(f.c) << 32));
}

const CharDfa& JsonGrammar::key_dfa(GrammarNodeId node, std::uint32_t slot, std::uint32_t key_set) const {
  const ObjectSpec& o = nodes_[node].object;
  if (key_set == 0) return *o.key_dfas[slot];
  std::lock_guard lock(key_sets_mutex_);
  auto& dfa = key_dfas_[{node, slot, key_set}];
  if (!dfa) dfa = std::make_unique<const CharDfa>(make_key_dfa(o, slot, key_sets_[key_set]));
  return *dfa;
}

JsonGrammar::Outcome JsonGrammar::consume_number(Frame& f, const NumberSpec& spec, std::uint8_t byte) const {
  return number_transition(spec, f, byte) ? Outcome::stay : Outcome::dead;
}

JsonGrammar::Outcome JsonGrammar::consume_string(Frame& f, const StringSpec& spec, std::uint8_t byte) const {
  if (f.d == 0) {
    if (byte != '"') return Outcome::dead;
    f.d = 1;
    return Outcome::stay;
  }
  const StringLexer lexer{*spec.dfa, &spec};
  switch (lexer.byte(f.a, f.b, f.c, byte)) {
    case Lex::dead: return Outcome::dead;
    case Lex::ok: return Outcome::stay;
    case Lex::closed: return Outcome::terminal;
  }
  return Outcome::dead;
}

JsonGrammar::Outcome JsonGrammar::consume_array(Frame& f, const ArraySpec& spec, std::uint8_t byte,
                                                GrammarNodeId& child) const {
  const std::uint32_t phase = f.a & 7, count = f.a >> 3;
  auto item = [&](std::uint32_t i) { return i < spec.prefix.size() ? spec.prefix[i] : spec.items; };
  auto push_item = [&]() {
    if (count >= spec.max_items || item(count) == kNoGrammarNode) return Outcome::dead;
    child = item(count);
    f.a = kArrAfterValue | (std::min(count + 1, spec.count_cap) << 3);
    return Outcome::push;
  };
  switch (phase) {
    case kArrStart:
      if (byte != '[') return Outcome::dead;
      f.a = kArrAfterOpen;
      return Outcome::stay;
    case kArrAfterOpen:
      if (byte == ']') return spec.min_items == 0 ? Outcome::terminal : Outcome::dead;
      return push_item();
    case kArrAfterValue:
      if (byte == ']') return count >= spec.min_items ? Outcome::terminal : Outcome::dead;
      if (byte != ',' || count >= spec.max_items || item(count) == kNoGrammarNode) return Outcome::dead;
      f.a = kArrAfterComma | (count << 3);
      return Outcome::stay;
    case kArrAfterComma: return push_item();
    default: return Outcome::dead;
  }
}

JsonGrammar::Outcome JsonGrammar::consume_object(Frame& f, const GrammarNode& n, std::uint8_t byte,
                                                 std::uint32_t pos, const TextSource& text,
                                                 GrammarNodeId& child) const {
  const ObjectSpec& spec = n.object;
  const std::uint32_t phase = f.a & 15, slot = f.a >> 8, flags = f.a & kObjPending;
  auto set = [&](std::uint32_t p, std::uint32_t s) { f.a = p | flags | (s << 8); };
  auto open_key = [&]() {
    if (spec.key_dfas[slot]->is_empty()) return Outcome::dead;
    set(kObjKey, slot);
    f.c = 0, f.d = 0, f.x0 = pos + 1;
    return Outcome::stay;
  };
  switch (phase) {
    case kObjStart:
      if (byte != '{') return Outcome::dead;
      set(kObjAfterOpen, 0);
      return Outcome::stay;
    case kObjAfterOpen:
    case kObjAfterComma:
      if (byte == '"') return open_key();
      if (byte == '}' && phase == kObjAfterOpen && !spec.required_from[slot]) return Outcome::terminal;
      return Outcome::dead;
    case kObjKey: {
      const CharDfa& dfa = key_dfa(f.node, slot, f.b);
      std::uint32_t count = 0;
      const StringLexer lexer{dfa, nullptr};
      switch (lexer.byte(f.c, f.d, count, byte)) {
        case Lex::dead: return Outcome::dead;
        case Lex::ok: return Outcome::stay;
        case Lex::closed: break;
      }
      const std::int32_t label = dfa.label(f.c);
      if (label == kAdditionalKeyLabel) {
        // Recorded after the token; a second one in the same token could repeat it.
        if (f.a & kObjPending) return Outcome::dead;
        f.a |= kObjPending;
        f.x1 = f.x0, f.x2 = pos;
      }
      const std::uint32_t flags_now = f.a & kObjPending;
      f.a = kObjColon | flags_now | (slot << 8);
      f.c = std::uint32_t(label), f.d = 0;
      return Outcome::stay;
    }
    case kObjColon:
      if (byte != ':') return Outcome::dead;
      set(kObjValue, slot);
      return Outcome::stay;
    case kObjValue: {
      const bool additional = std::int32_t(f.c) == kAdditionalKeyLabel;
      child = additional ? spec.additional : spec.properties[f.c].node;
      set(kObjAfterValue, additional ? std::uint32_t(spec.properties.size()) : f.c + 1);
      f.c = 0;
      return Outcome::push;
    }
    case kObjAfterValue:
      if (byte == '}') return spec.required_from[slot] ? Outcome::dead : Outcome::terminal;
      if (byte != ',' || spec.key_dfas[slot]->is_empty()) return Outcome::dead;
      set(kObjAfterComma, slot);
      return Outcome::stay;
    default: return Outcome::dead;
  }
}

JsonGrammar::Outcome JsonGrammar::consume(Frame& f, std::uint8_t byte, std::uint32_t pos, const TextSource& text,
                                          GrammarNodeId& child) const {
  const GrammarNode& n = nodes_[f.node];
  switch (n.kind) {
    case GrammarKind::literal:
      if (f.a >= n.literal.size() || std::uint8_t(n.literal[f.a]) != byte) return Outcome::dead;
      ++f.a;
      return f.a == n.literal.size() ? Outcome::terminal : Outcome::stay;
    case GrammarKind::number: return consume_number(f, n.number, byte);
    case GrammarKind::string: return consume_string(f, n.string, byte);
    case GrammarKind::object: return consume_object(f, n, byte, pos, text, child);
    case GrammarKind::array: return consume_array(f, n.array, byte, child);
    case GrammarKind::alternatives: break;
  }
  return Outcome::dead;
}

void JsonGrammar::step(std::span<const Frame> stack, std::uint8_t byte, std::uint32_t pos, const TextSource& text,
                       MatchState& out) const {
  const std::size_t n = stack.size();
  if (n == 0) return;  // a complete document takes no more bytes
  Frame top = stack[n - 1];
  GrammarNodeId child = kNoGrammarNode;
  auto emit_prefix = [&]() {
    for (std::size_t i = 0; i + 1 < n; ++i) out.push_frame(stack[i]);
  };
  switch (consume(top, byte, pos, text, child)) {
    case Outcome::dead: break;
    case Outcome::stay:
      emit_prefix();
      out.push_frame(top);
      out.close_stack();
      break;
    case Outcome::terminal:
      emit_prefix();
      out.close_stack();
      break;
    case Outcome::push:
      for (GrammarNodeId g : nodes_[child].expansion) {
        if (!nodes_[g].first_bytes[byte]) continue;
        Frame c;
        c.node = g;
        GrammarNodeId unused = kNoGrammarNode;
        const Outcome o = consume(c, byte, pos, text, unused);
        assert(o != Outcome::push);
        if (o == Outcome::dead) continue;
        emit_prefix();
        out.push_frame(top);
        if (o == Outcome::stay) out.push_frame(c);
        out.close_stack();
      }
      break;
  }
  // A frame that may end here (a number) lets its parent take the byte.
  if (n > 1 && can_finish(stack[n - 1])) step(stack.first(n - 1), byte, pos, text, out);
}

MatchState JsonGrammar::initial_state() const {
  MatchState s;
  for (GrammarNodeId g : nodes_[root_].expansion) {
    Frame f;
    f.node = g;
    s.add(std::span(&f, 1));
  }
  return s;
}

bool JsonGrammar::advance(MatchState& state, std::string_view bytes, std::string_view history) const {
  MatchState next;
  const TextSource text{history, bytes};
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    next.clear();
    const std::uint32_t pos = std::uint32_t(history.size() + i);
    for (std::size_t s = 0; s < state.num_stacks(); ++s) step(state.stack(s), std::uint8_t(bytes[i]), pos, text, next);
    next.canonicalise();
    std::swap(state, next);
    if (state.empty()) return false;
  }
  std::string document;
  bool pending = false;
  for (std::size_t s = 0; s < state.num_stacks() && !pending; ++s)
    for (const Frame& f : state.stack(s)) pending = pending || (f.a & kObjPending && nodes_[f.node].kind == GrammarKind::object);
  if (pending) {
    document.reserve(history.size() + bytes.size());
    document.append(history).append(bytes);
    normalise(state, document);
  }
  return true;
}

void JsonGrammar::normalise(MatchState& state, std::string_view document) const {
  MatchState out;
  const TextSource text{document, {}};
  for (std::size_t s = 0; s < state.num_stacks(); ++s) {
    for (Frame f : state.stack(s)) {
      if (nodes_[f.node].kind == GrammarKind::object && (f.a & kObjPending)) {
        f.b = intern_key_set(f.b, decode_json_string(text, f.x1, f.x2));
        f.a &= ~std::uint32_t(kObjPending);
        f.x1 = f.x2 = 0;
        if ((f.a & 15) == kObjKey) {
          // A key begun after the recorded one: its state in the automaton that now
          // excludes the recorded key (still live: only closing on it changes).
          const CharDfa& dfa = key_dfa(f.node, f.a >> 8, f.b);
          std::uint32_t state = 0, lex = 0;
          for (std::uint32_t p = f.x0; p < document.size(); ++p)
            string_byte_unbounded(dfa, state, lex, std::uint8_t(document[p]));
          f.c = state, f.d = lex;
        }
      }
      out.push_frame(f);
    }
    out.close_stack();
  }
  out.canonicalise();
  state = std::move(out);
}

bool JsonGrammar::is_complete(const MatchState& state) const {
  for (std::size_t s = 0; s < state.num_stacks(); ++s) {
    const auto st = state.stack(s);
    if (st.empty() || (st.size() == 1 && can_finish(st[0]))) return true;
  }
  return false;
}

bool JsonGrammar::is_finished(const MatchState& state) const {
  if (state.empty()) return false;
  for (std::size_t s = 0; s < state.num_stacks(); ++s)
    if (!state.stack(s).empty()) return false;
  return true;
}

bool JsonGrammar::accepts(std::string_view document) const {
  MatchState state = initial_state();
  for (std::size_t i = 0; i < document.size(); ++i)
    if (!advance(state, document.substr(i, 1), document.substr(0, i))) return false;
  return is_complete(state);
}

std::uint32_t JsonGrammar::intern_key_set(std::uint32_t base, std::string key) const {
  std::lock_guard lock(key_sets_mutex_);
  std::vector<std::string> keys = key_sets_[base];
  keys.insert(std::lower_bound(keys.begin(), keys.end(), key), std::move(key));
  std::string id;
  for (const auto& k : keys) {
    id += std::to_string(k.size());
    id += ':';
    id += k;
  }
  auto [it, fresh] = key_set_ids_.emplace(std::move(id), std::uint32_t(key_sets_.size()));
  if (fresh) key_sets_.push_back(std::move(keys));
  return it->second;
}

std::string decode_json_string(const TextSource& text, std::uint32_t begin, std::uint32_t end) {
  std::string out;
  std::uint32_t i = begin;
  auto hex4 = [&](std::uint32_t at) {
    std::uint32_t v = 0;
    for (std::uint32_t k = 0; k < 4; ++k) v = v * 16 + std::uint32_t(std::max(hex_value(text.at(at + k)), 0));
    return v;
  };
  while (i < end) {
    const std::uint8_t b = text.at(i);
    if (b != '\\') {
      out += char(b);
      ++i;
      continue;
    }
    const std::uint8_t e = text.at(i + 1);
    i += 2;
    switch (e) {
      case 'b': out += '\b'; break;
      case 'f': out += '\f'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      case 't': out += '\t'; break;
      case 'u': {
        std::uint32_t cp = hex4(i);
        i += 4;
        if (cp >= 0xD800 && cp <= 0xDBFF && i + 6 <= end) {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (hex4(i + 2) - 0xDC00);
          i += 6;
        }
        unicode::append_utf8(out, cp);
        break;
      }
      default: out += char(e);  // " \ /
    }
  }
  return out;
}

}  // namespace arbor::model

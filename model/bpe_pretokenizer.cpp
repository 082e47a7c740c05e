#include "model/bpe_pretokenizer.hpp"

#include "model/unicode.hpp"

namespace arbor::model {

namespace {

using unicode::CodeUnit;

struct Units {
  const std::vector<CodeUnit>& u;
  std::size_t end;  // matching never crosses this index
  std::uint8_t fl(std::size_t i) const { return unicode::flags(u[i].cp); }
  bool letter(std::size_t i) const { return i < end && (fl(i) & unicode::kLetter); }
  bool number(std::size_t i) const { return i < end && (fl(i) & unicode::kNumber); }
  bool space(std::size_t i) const { return i < end && (fl(i) & unicode::kWhitespace); }
  bool other(std::size_t i) const {  // [^\s\p{L}\p{N}]
    return i < end && !(fl(i) & (unicode::kWhitespace | unicode::kLetter | unicode::kNumber));
  }
  bool newline(std::size_t i) const { return i < end && (u[i].cp == '\r' || u[i].cp == '\n'); }
  std::uint32_t cp(std::size_t i) const { return i < end ? u[i].cp : 0; }
  template <class Pred>
  std::size_t run(std::size_t i, Pred pred) const {
    while (pred(i)) ++i;
    return i;
  }
};

std::uint32_t lower_ascii(std::uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// Length in units of a contraction at i ('s 't 're 've 'm 'll 'd), 0 if none.
std::size_t contraction(const Units& t, std::size_t i, bool ignore_case) {
  if (t.cp(i) != '\'') return 0;
  auto c = [&](std::size_t k) { return ignore_case ? lower_ascii(t.cp(k)) : t.cp(k); };
  const std::uint32_t a = c(i + 1), b = c(i + 2);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// \s+(?!\S)|\s+ at a whitespace unit i: the run, minus its last unit when a
// non-space follows (that unit then prefixes the next word).
std::size_t trailing_space_rule(const Units& t, std::size_t i) {
  const std::size_t k = t.run(i, [&](std::size_t j) { return t.space(j); });
  if (k == t.end || k - i == 1) return k - i;
  return k - i - 1;
}

std::size_t match_gpt2(const Units& t, std::size_t i) {
  if (std::size_t n = contraction(t, i, false)) return n;
  const std::size_t j = (t.cp(i) == ' ') ? i + 1 : i;
  if (t.letter(j)) return t.run(j, [&](std::size_t k) { return t.letter(k); }) - i;
  if (t.number(j)) return t.run(j, [&](std::size_t k) { return t.number(k); }) - i;
  if (t.other(j)) return t.run(j, [&](std::size_t k) { return t.other(k); }) - i;
  if (t.space(i)) return trailing_space_rule(t, i);
  return 1;
}

std::size_t match_llama3(const Units& t, std::size_t i) {
  if (std::size_t n = contraction(t, i, true)) return n;
  if (t.letter(i)) return t.run(i, [&](std::size_t k) { return t.letter(k); }) - i;
  if (!t.newline(i) && !t.number(i) && t.letter(i + 1))
    return t.run(i + 1, [&](std::size_t k) { return t.letter(k); }) - i;
  if (t.number(i)) {
    std::size_t k = i;
    while (k < i + 3 && t.number(k)) ++k;
    return k - i;
  }
  const std::size_t j = (t.cp(i) == ' ') ? i + 1 : i;
  if (t.other(j)) {
    std::size_t k = t.run(j, [&](std::size_t m) { return t.other(m); });
    return t.run(k, [&](std::size_t m) { return t.newline(m); }) - i;
  }
  if (t.space(i)) {
    const std::size_t k = t.run(i, [&](std::size_t m) { return t.space(m); });
    for (std::size_t m = k; m > i; --m)  // \s*[\r\n]+ ends after the run's last newline
      if (t.newline(m - 1)) return m - i;
    return trailing_space_rule(t, i);
  }
  return 1;
}

// Splits units [begin, end) with `match` and appends the words as byte ranges.
template <class Match>
void split(std::string_view text, const std::vector<CodeUnit>& u, std::size_t begin,
           std::size_t end, Match match, std::vector<std::string_view>& out) {
  const Units t{u, end};
  std::size_t i = begin;
  while (i < end) {
    std::size_t n = match(t, i);
    if (n == 0) n = 1;
    const std::size_t last = i + n - 1;
    const std::size_t from = u[i].offset, to = u[last].offset + u[last].num_bytes;
    out.push_back(text.substr(from, to - from));
    i += n;
  }
}

}  // namespace

std::optional<PreTokenizer> pre_tokenizer_from_name(std::string_view name) {
  if (name == "default" || name == "gpt2" || name == "gpt-2" || name == "mpt" || name == "olmo" ||
      name == "jais" || name == "phi-2" || name == "stablelm2" || name == "poro-chat")
    return PreTokenizer::gpt2;
  if (name == "smollm" || name == "starcoder" || name == "refact" || name == "command-r" ||
      name == "codeshell" || name == "exaone" || name == "minerva-7b")
    return PreTokenizer::digits_then_gpt2;
  if (name == "llama3" || name == "llama-bpe" || name == "llama-v3" || name == "falcon3" ||
      name == "pixtral" || name == "dbrx" || name == "smaug-bpe")
    return PreTokenizer::llama3;
  return std::nullopt;
}

std::vector<std::string_view> pre_tokenize(PreTokenizer kind, std::string_view text) {
  const std::vector<CodeUnit> units = unicode::decode_utf8(text);
  std::vector<std::string_view> out;
  switch (kind) {
    case PreTokenizer::gpt2:
      split(text, units, 0, units.size(), match_gpt2, out);
      break;
    case PreTokenizer::llama3:
      split(text, units, 0, units.size(), match_llama3, out);
      break;
    case PreTokenizer::digits_then_gpt2: {
      // Every \p{N} unit is a piece on its own; the runs between go through gpt2.
      std::size_t start = 0;
      for (std::size_t i = 0; i <= units.size(); ++i) {
        const bool digit = i < units.size() && (unicode::flags(units[i].cp) & unicode::kNumber);
        if (i == units.size() || digit) {
          split(text, units, start, i, match_gpt2, out);
          if (digit) split(text, units, i, i + 1, match_gpt2, out);
          start = i + 1;
        }
      }
      break;
    }
  }
  return out;
}

}  // namespace arbor::model

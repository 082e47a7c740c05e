#include "model/char_dfa.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace arbor::model {

namespace {

// ASCII lookup tables cost 512 bytes a state: kept for DFAs up to this size.
constexpr std::uint32_t kMaxAsciiTableStates = 4096;

constexpr bool is_surrogate(std::uint32_t cp) { return cp >= 0xD800 && cp <= 0xDFFF; }

}  // namespace

bool decode_utf8(std::string_view text, std::vector<std::uint32_t>& out) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto b0 = std::uint8_t(text[i]);
    int n = 0;
    std::uint32_t cp = 0, min = 0;
    if (b0 < 0x80) {
      out.push_back(b0);
      ++i;
      continue;
    } else if (b0 >= 0xC2 && b0 <= 0xDF) {
      n = 1, cp = b0 & 0x1F, min = 0x80;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
      n = 2, cp = b0 & 0x0F, min = 0x800;
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
      n = 3, cp = b0 & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (i + std::size_t(n) >= text.size()) return false;
    for (int k = 1; k <= n; ++k) {
      const auto b = std::uint8_t(text[i + std::size_t(k)]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    if (cp < min || cp > kMaxCodePoint || is_surrogate(cp)) return false;
    out.push_back(cp);
    i += std::size_t(n) + 1;
  }
  return true;
}

std::uint32_t CharDfa::add_state(std::int32_t label) {
  labels_.push_back(label);
  building_.emplace_back();
  return std::uint32_t(labels_.size() - 1);
}

void CharDfa::add_edge(std::uint32_t from, std::uint32_t lo, std::uint32_t hi, std::uint32_t to) {
  if (lo > hi) return;
  building_[from].push_back({lo, hi, to});
}

void CharDfa::finish() {
  const std::uint32_t n = std::uint32_t(labels_.size());
  // Live states: those that reach an accepting state (reverse reachability).
  std::vector<std::vector<std::uint32_t>> reverse(n);
  for (std::uint32_t s = 0; s < n; ++s)
    for (const auto& e : building_[s]) reverse[e.target].push_back(s);
  std::vector<char> live(n, 0);
  std::vector<std::uint32_t> work;
  for (std::uint32_t s = 0; s < n; ++s)
    if (labels_[s] != kReject) live[s] = 1, work.push_back(s);
  while (!work.empty()) {
    const std::uint32_t s = work.back();
    work.pop_back();
    for (std::uint32_t p : reverse[s])
      if (!live[p]) live[p] = 1, work.push_back(p);
  }
  // Keep live states reachable from the start, numbered in BFS order (start = 0).
  std::vector<std::uint32_t> remap(n, kDeadState);
  std::vector<std::uint32_t> order;
  if (n > 0 && live[0]) {
    remap[0] = 0;
    order.push_back(0);
    for (std::size_t i = 0; i < order.size(); ++i)
      for (const auto& e : building_[order[i]])
        if (live[e.target] && remap[e.target] == kDeadState) {
          remap[e.target] = std::uint32_t(order.size());
          order.push_back(e.target);
        }
  }
  std::vector<std::int32_t> labels;
  labels.reserve(order.size());
  edge_begin_.assign(1, 0);
  edges_.clear();
  for (std::uint32_t old : order) {
    labels.push_back(labels_[old]);
    std::vector<Edge> es;
    for (const auto& e : building_[old])
      if (remap[e.target] != kDeadState) es.push_back({e.lo, e.hi, remap[e.target]});
    std::sort(es.begin(), es.end(), [](const Edge& a, const Edge& b) { return a.lo < b.lo; });
    for (const auto& e : es) {
      if (edges_.size() > edge_begin_.back() && edges_.back().target == e.target && edges_.back().hi + 1 == e.lo)
        edges_.back().hi = e.hi;
      else
        edges_.push_back(e);
    }
    edge_begin_.push_back(std::uint32_t(edges_.size()));
  }
  labels_ = std::move(labels);
  building_.clear();
  building_.shrink_to_fit();
  ascii_.clear();
  if (labels_.size() <= kMaxAsciiTableStates) {
    ascii_.resize(labels_.size());
    for (std::uint32_t s = 0; s < labels_.size(); ++s) {
      ascii_[s].fill(kDeadState);
      for (const auto& e : edges(s))
        for (std::uint32_t c = e.lo; c <= std::min<std::uint32_t>(e.hi, 127); ++c) ascii_[s][c] = e.target;
    }
  }
}

std::uint32_t CharDfa::next_slow(std::uint32_t state, std::uint32_t cp) const {
  const auto es = edges(state);
  auto it = std::upper_bound(es.begin(), es.end(), cp, [](std::uint32_t v, const Edge& e) { return v < e.lo; });
  if (it == es.begin()) return kDeadState;
  --it;
  return cp <= it->hi ? it->target : kDeadState;
}

std::int32_t CharDfa::match(std::span<const std::uint32_t> code_points) const {
  if (is_empty()) return kReject;
  std::uint32_t s = 0;
  for (std::uint32_t cp : code_points) {
    s = next(s, cp);
    if (s == kDeadState) return kReject;
  }
  return labels_[s];
}

std::int32_t CharDfa::match(std::string_view utf8) const {
  std::vector<std::uint32_t> cps;
  if (!decode_utf8(utf8, cps)) return kReject;
  return match(cps);
}

CharDfa CharDfa::any_string() {
  CharDfa d;
  d.add_state(0);
  d.add_edge(0, 0, 0xD7FF, 0);
  d.add_edge(0, 0xE000, kMaxCodePoint, 0);
  d.finish();
  return d;
}

CharDfa CharDfa::literals(std::span<const std::string> strings, std::span<const std::int32_t> labels) {
  return literals_or_other(strings, labels, kReject);
}

CharDfa CharDfa::literals_or_other(std::span<const std::string> strings, std::span<const std::int32_t> labels,
                                   std::int32_t other_label) {
  // A trie over code points; with other_label, every string leaving the trie goes to
  // an accepting sink, and trie nodes that end no listed string accept as "other".
  CharDfa d;
  std::vector<std::map<std::uint32_t, std::uint32_t>> children(1);
  std::vector<char> ends(1, 0);
  d.add_state(kReject);
  for (std::size_t i = 0; i < strings.size(); ++i) {
    std::vector<std::uint32_t> cps;
    if (!decode_utf8(strings[i], cps)) continue;
    std::uint32_t s = 0;
    for (std::uint32_t cp : cps) {
      auto it = children[s].find(cp);
      if (it == children[s].end()) {
        const std::uint32_t t = d.add_state(kReject);
        children.emplace_back();
        ends.push_back(0);
        it = children[s].emplace(cp, t).first;
      }
      s = it->second;
    }
    if (!ends[s]) d.set_label(s, labels[i]);  // the first occurrence wins
    ends[s] = 1;
  }
  const std::uint32_t num_trie = d.num_states();
  std::uint32_t sink = kDeadState;
  if (other_label != kReject) {
    sink = d.add_state(other_label);
    d.add_edge(sink, 0, 0xD7FF, sink);
    d.add_edge(sink, 0xE000, kMaxCodePoint, sink);
  }
  for (std::uint32_t s = 0; s < num_trie; ++s) {
    if (other_label != kReject && !ends[s]) d.set_label(s, other_label);
    std::uint32_t lo = 0;
    for (const auto& [cp, t] : children[s]) {
      if (sink != kDeadState && lo < cp) {
        // [lo, cp) minus surrogates goes to the sink.
        const std::uint32_t hi = cp - 1;
        if (lo <= 0xD7FF) d.add_edge(s, lo, std::min<std::uint32_t>(hi, 0xD7FF), sink);
        if (hi >= 0xE000) d.add_edge(s, std::max<std::uint32_t>(lo, 0xE000), hi, sink);
      }
      d.add_edge(s, cp, cp, t);
      lo = cp + 1;
    }
    if (sink != kDeadState && lo <= kMaxCodePoint) {
      if (lo <= 0xD7FF) d.add_edge(s, lo, 0xD7FF, sink);
      d.add_edge(s, std::max<std::uint32_t>(lo, 0xE000), kMaxCodePoint, sink);
    }
  }
  d.finish();
  return d;
}

CharDfa CharDfa::intersect(const CharDfa& a, const CharDfa& b) {
  CharDfa d;
  if (a.is_empty() || b.is_empty()) {
    d.finish();
    return d;
  }
  std::unordered_map<std::uint64_t, std::uint32_t> ids;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> work;
  auto id_of = [&](std::uint32_t x, std::uint32_t y) {
    const std::uint64_t key = (std::uint64_t(x) << 32) | y;
    auto [it, fresh] = ids.emplace(key, 0);
    if (fresh) {
      it->second = d.add_state(a.accepts(x) && b.accepts(y) ? a.label(x) : kReject);
      work.emplace_back(x, y);
    }
    return it->second;
  };
  id_of(0, 0);
  for (std::size_t i = 0; i < work.size(); ++i) {
    const auto [x, y] = work[i];
    const std::uint32_t from = std::uint32_t(i);
    for (const auto& ea : a.edges(x))
      for (const auto& eb : b.edges(y)) {
        const std::uint32_t lo = std::max(ea.lo, eb.lo), hi = std::min(ea.hi, eb.hi);
        if (lo <= hi) d.add_edge(from, lo, hi, id_of(ea.target, eb.target));
      }
  }
  d.finish();
  return d;
}

}  // namespace arbor::model

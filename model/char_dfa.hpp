// Deterministic automata over Unicode scalar values (code points) with interval-labelled
// edges: the character level of JSON strings (patterns, formats, enum strings, object
// keys). The byte level (UTF-8, JSON escapes) is json_grammar's job.
//
// Contract
// - States are 0..num_states()-1, the start state is 0. Every state can reach an
//   accepting state (dead states are trimmed by finish()), so a DFA whose language is
//   empty has no states at all (is_empty()).
// - An accepting state carries a label >= 0 (which key or literal matched); kReject
//   marks a non-accepting state.
// - Immutable after finish(); all const methods are thread-safe. next() is O(1) for
//   ASCII and O(log edges) otherwise.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace arbor::model {

inline constexpr std::uint32_t kMaxCodePoint = 0x10FFFF;
inline constexpr std::uint32_t kDeadState = 0xFFFFFFFFu;

// Decodes valid UTF-8 (shortest form, no surrogates) into code points; false when invalid.
bool decode_utf8(std::string_view text, std::vector<std::uint32_t>& out);

class CharDfa {
 public:
  static constexpr std::int32_t kReject = -1;
  struct Edge {
    std::uint32_t lo, hi;  // inclusive code point range
    std::uint32_t target;
  };

  // Building: add states and edges (edges of one state must not overlap), then finish().
  std::uint32_t add_state(std::int32_t label = kReject);
  void add_edge(std::uint32_t from, std::uint32_t lo, std::uint32_t hi, std::uint32_t to);
  void set_label(std::uint32_t state, std::int32_t label) { labels_[state] = label; }
  // Sorts edges, merges adjacent ones, trims states that cannot reach acceptance
  // (renumbering the rest, start stays 0 unless the language is empty).
  void finish();

  bool is_empty() const { return labels_.empty(); }
  std::uint32_t num_states() const { return std::uint32_t(labels_.size()); }
  std::uint32_t next(std::uint32_t state, std::uint32_t cp) const {
    if (cp < 128 && !ascii_.empty()) return ascii_[state][cp];
    return next_slow(state, cp);
  }
  std::int32_t label(std::uint32_t state) const { return labels_[state]; }
  bool accepts(std::uint32_t state) const { return labels_[state] != kReject; }
  std::span<const Edge> edges(std::uint32_t state) const {
    return {edges_.data() + edge_begin_[state], edges_.data() + edge_begin_[state + 1]};
  }
  // Label of the whole-string match of `utf8`, or kReject (also for invalid UTF-8).
  std::int32_t match(std::string_view utf8) const;
  std::int32_t match(std::span<const std::uint32_t> code_points) const;

  // Every string, label 0.
  static CharDfa any_string();
  // Exactly the given strings (UTF-8); strings[i] gets labels[i].
  static CharDfa literals(std::span<const std::string> strings, std::span<const std::int32_t> labels);
  // strings[i] gets labels[i] (kReject: excluded); every other string gets other_label
  // (kReject: only the listed strings).
  static CharDfa literals_or_other(std::span<const std::string> strings,
                                   std::span<const std::int32_t> labels, std::int32_t other_label);
  // Strings in both; the label is a's.
  static CharDfa intersect(const CharDfa& a, const CharDfa& b);

 private:
  std::uint32_t next_slow(std::uint32_t state, std::uint32_t cp) const;

  std::vector<std::int32_t> labels_;
  std::vector<std::vector<Edge>> building_;  // per state, until finish()
  std::vector<std::uint32_t> edge_begin_;    // num_states + 1
  std::vector<Edge> edges_;
  std::vector<std::array<std::uint32_t, 128>> ascii_;  // next() for cp < 128
};

}  // namespace arbor::model

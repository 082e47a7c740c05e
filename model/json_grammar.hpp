// A JSON Schema compiled for generation: a byte-level pushdown automaton that accepts
// exactly the JSON texts that validate against the schema and are written in Arbor's
// generation form (below). It is the grammar behind constrained decoding
// (json_constraint.hpp); this header is its engine, usable on its own to check texts.
//
// Generation form (what the automaton accepts, beyond validity)
// - Whitespace: none outside strings (compact JSON). Keeps outputs short and the
//   number of automaton states small, so token masks are cached well.
// - Object keys: declared properties in schema order (`properties` order, then
//   `required` names not listed there), each at most once, optional ones may be left
//   out; when additionalProperties allows other keys, they come after the declared
//   ones, each distinct. enum/const objects keep their keys in the schema's order.
// - Strings: raw UTF-8 (no invalid UTF-8, no raw control characters); the escapes
//   \" \\ \/ \b \f \n \r \t, and \u only for the control characters U+0000..U+001F
//   (so no \u surrogate pairs and no letter spelled as an escape: a small model offered
//   \u0041 for "A" takes it). Length limits count code points; patterns match code points.
// - Numbers: -?(0|[1-9][0-9]*)(\.[0-9]+)? without exponent, at most 15 digits
//   (a lone leading 0 not counted); integers may carry a zero fraction (3.0). Bounds
//   (minimum, maximum, exclusive*) are exact on these values, and 15 digits keep them
//   exact in double precision too.
//
// Enforced keywords: type (and type lists), enum/const (any JSON values), properties,
// required, additionalProperties (false, true, a schema), items, prefixItems (and the
// draft-7 array form with additionalItems), minItems, maxItems, minLength, maxLength,
// pattern, format (date, time, date-time, uuid), minimum, maximum, exclusiveMinimum,
// exclusiveMaximum, anyOf, oneOf (when its alternatives are provably disjoint), $ref
// (recursive too; without sibling assertions), $defs, a one-element allOf, nesting.
// Anything else is an error naming the keyword's JSON pointer (multipleOf,
// uniqueItems, contains, min/maxProperties, patternProperties, propertyNames, not,
// if/then/else, allOf of several schemas, anyOf/oneOf/$ref beside other assertions).
// enum/const may sit beside any keyword the validator knows: the values that fail the
// rest of the schema are dropped at compile time.
//
// The automaton: a set of stacks of frames (a nondeterministic pushdown automaton; the
// set has several stacks only while anyOf alternatives are ambiguous). A frame is a
// small value (node + 4 words), so states are hashable and masks cacheable per state.
// Every state it enters can still reach acceptance (no dead ends): unsatisfiable
// subschemas are removed at compile time and leaf frames only move to live states.
//
// Thread-safety: a JsonGrammar is immutable after compile except for an internal table
// of additional-property key sets, guarded by a mutex; all methods are safe to call
// from several threads.
#pragma once

#include <bitset>
#include <cstdint>
#include <map>
#include <tuple>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.hpp"
#include "model/char_dfa.hpp"
#include "model/json_schema.hpp"

namespace arbor::model {

using GrammarNodeId = std::uint32_t;
inline constexpr GrammarNodeId kNoGrammarNode = 0xFFFFFFFFu;
using Int128 = __int128;

// One automaton frame. node/a/b/c/d are its identity; x0..x2 are byte offsets into the
// document where additional-property keys start and end, used to record a written key
// after the token that wrote it (not part of the identity).
struct Frame {
  std::uint32_t node = 0, a = 0, b = 0, c = 0, d = 0;
  std::uint32_t x0 = 0, x1 = 0, x2 = 0;
  bool same_identity(const Frame& o) const {
    return node == o.node && a == o.a && b == o.b && c == o.c && d == o.d;
  }
};

// A set of stacks, stored flat. An empty stack means "the document is complete".
class MatchState {
 public:
  std::size_t num_stacks() const { return ends_.size(); }
  std::span<const Frame> stack(std::size_t i) const {
    const std::uint32_t begin = i ? ends_[i - 1] : 0;
    return {frames_.data() + begin, frames_.data() + ends_[i]};
  }
  bool empty() const { return ends_.empty(); }
  void clear() {
    frames_.clear();
    ends_.clear();
  }
  void add(std::span<const Frame> stack) {
    frames_.insert(frames_.end(), stack.begin(), stack.end());
    ends_.push_back(std::uint32_t(frames_.size()));
  }
  // Frames appended one by one, then close_stack().
  void push_frame(const Frame& f) { frames_.push_back(f); }
  void close_stack() { ends_.push_back(std::uint32_t(frames_.size())); }
  // Sorts stacks and removes duplicates (identical frames, offsets included).
  void canonicalise();
  // Removes the empty stacks (complete documents); true when there was one.
  bool remove_empty_stacks();
  // Identity words (offsets excluded) for cache keys.
  void identity(std::vector<std::uint32_t>& out) const;

 private:
  std::vector<Frame> frames_;
  std::vector<std::uint32_t> ends_;
};

// Reads document bytes by absolute offset: the text before the current token, then the
// bytes of the token consumed so far.
struct TextSource {
  std::string_view history;
  std::string_view current;
  std::uint8_t at(std::uint32_t pos) const {
    return pos < history.size() ? std::uint8_t(history[pos]) : std::uint8_t(current[pos - history.size()]);
  }
};

struct NumberSpec {
  bool integer = false;
  std::optional<Int128> lo, hi;  // inclusive, in units of 1e-15
};

struct StringSpec {
  std::shared_ptr<const CharDfa> dfa;
  std::uint64_t min_length = 0;
  std::optional<std::uint64_t> max_length;
  std::uint32_t count_cap = 0;     // counts saturate here (max_length, else min_length)
  bool universal = false;          // dfa accepts every string: liveness depends on counts only
  std::vector<std::uint8_t> live;  // [state * (count_cap + 1) + count], when needed
};

struct GrammarProperty {
  std::string name;
  GrammarNodeId node = kNoGrammarNode;
  bool required = false;
};

struct ObjectSpec {
  std::vector<GrammarProperty> properties;          // generation order
  GrammarNodeId additional = kNoGrammarNode;       // kNoGrammarNode: no other keys
  std::vector<std::string> forbidden;              // declared, but no value can match
  std::vector<std::shared_ptr<const CharDfa>> key_dfas;  // per slot 0..n: candidate keys
  std::vector<std::uint8_t> required_from;         // per slot: a required property remains
};

struct ArraySpec {
  std::vector<GrammarNodeId> prefix;
  GrammarNodeId items = kNoGrammarNode;  // after the prefix; kNoGrammarNode: none
  std::uint32_t min_items = 0;
  std::uint32_t max_items = 0xFFFFFFFFu;
  std::uint32_t count_cap = 0;  // counts saturate here
};

enum class GrammarKind : std::uint8_t { alternatives, literal, number, string, object, array };

struct GrammarNode {
  GrammarKind kind = GrammarKind::alternatives;
  std::string pointer;                       // schema location, for messages
  std::vector<GrammarNodeId> alternatives;   // alternatives
  std::string literal;                       // literal: null, true, false
  NumberSpec number;
  StringSpec string;
  ObjectSpec object;
  ArraySpec array;
  // Concrete (non-alternative) nodes this node stands for, and their first bytes.
  std::vector<GrammarNodeId> expansion;
  std::bitset<256> first_bytes;
};

class JsonGrammar {
 public:
  // Builds the grammar of a schema compiled with SchemaUse::generation. Errors list
  // every keyword the automaton cannot enforce, with its JSON pointer.
  static Result<std::shared_ptr<const JsonGrammar>> compile(const JsonSchema& schema,
                                                            std::vector<SchemaError>* errors = nullptr);
  // Parses, compiles the schema and builds the grammar.
  static Result<std::shared_ptr<const JsonGrammar>> from_json(const Json& schema,
                                                              std::vector<SchemaError>* errors = nullptr);
  static Result<std::shared_ptr<const JsonGrammar>> from_text(std::string_view schema_text,
                                                              std::vector<SchemaError>* errors = nullptr);

  const JsonSchema& schema() const { return schema_; }
  const GrammarNode& node(GrammarNodeId id) const { return nodes_[id]; }
  std::size_t num_nodes() const { return nodes_.size(); }

  // --- The automaton ---
  MatchState initial_state() const;
  // Successors of one stack on byte `byte` at document offset `pos` (appended to out).
  void step(std::span<const Frame> stack, std::uint8_t byte, std::uint32_t pos, const TextSource& text,
            MatchState& out) const;
  // Advances `state` over `bytes` (the document so far is `history`), as one token: at
  // most one additional-property key per object may end inside it (the set of written
  // keys is updated after the token). Returns false and leaves `state` empty when some
  // byte is not allowed.
  bool advance(MatchState& state, std::string_view bytes, std::string_view history) const;
  // The document may end here / must end here (nothing may follow).
  bool is_complete(const MatchState& state) const;
  bool is_finished(const MatchState& state) const;
  // Whole-document check, byte by byte.
  bool accepts(std::string_view document) const;

  // True when the frame, on top of a stack, can end before the next byte (a number).
  bool can_finish(const Frame& f) const;
  // The keys an object may write at `slot` once the additional keys in `key_set` are
  // written (those are excluded, so a state never depends on the text). Built lazily.
  const CharDfa& key_dfa(GrammarNodeId node, std::uint32_t slot, std::uint32_t key_set) const;

 private:
  friend class GrammarBuilder;
  JsonGrammar() = default;

  enum class Outcome { dead, stay, push, terminal };
  Outcome consume(Frame& f, std::uint8_t byte, std::uint32_t pos, const TextSource& text,
                  GrammarNodeId& child) const;
  Outcome consume_number(Frame& f, const NumberSpec& spec, std::uint8_t byte) const;
  Outcome consume_string(Frame& f, const StringSpec& spec, std::uint8_t byte) const;
  Outcome consume_object(Frame& f, const GrammarNode& n, std::uint8_t byte, std::uint32_t pos,
                         const TextSource& text, GrammarNodeId& child) const;
  Outcome consume_array(Frame& f, const ArraySpec& spec, std::uint8_t byte, GrammarNodeId& child) const;
  void normalise(MatchState& state, std::string_view document) const;
  std::uint32_t intern_key_set(std::uint32_t base, std::string key) const;

  JsonSchema schema_;
  std::vector<GrammarNode> nodes_;
  GrammarNodeId root_ = 0;

  // Sets of additional-property keys already written in an object (id 0: empty), and
  // the key automata that exclude them, per (object node, slot, set).
  mutable std::mutex key_sets_mutex_;
  mutable std::vector<std::vector<std::string>> key_sets_{{}};
  mutable std::unordered_map<std::string, std::uint32_t> key_set_ids_;
  mutable std::map<std::tuple<GrammarNodeId, std::uint32_t, std::uint32_t>, std::unique_ptr<const CharDfa>> key_dfas_;
};

// Decodes the JSON string content in [begin, end) of `text` (escapes resolved) to UTF-8.
std::string decode_json_string(const TextSource& text, std::uint32_t begin, std::uint32_t end);

}  // namespace arbor::model

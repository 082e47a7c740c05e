// Constrained decoding: generation that can only produce JSON valid against a JSON
// Schema. This is the subsystem's interface header; the layers below it are
// json_schema.hpp (schema + validator), json_grammar.hpp (the byte automaton and the
// generation form it enforces: compact JSON, properties in schema order) and
// token_mask.hpp (token sets, the vocabulary trie).
//
// Use (a scheduler, per constrained sequence):
//
//   auto vocab = TokenTrie::build(model.tokenizer());              // once per model
//   auto compiled = CompiledConstraint::compile(schema, vocab);    // once per schema
//   if (!compiled) -> reject the request: compiled.error() names each keyword it
//                     cannot enforce with its JSON pointer (never silently ignored)
//   JsonConstraint c(*compiled);                                   // per sequence
//   each decode step, for this sequence's logits row:
//     token = sampler.sample(row, c.allowed());   // or c.apply(row), then sample
//     c.accept(token);                            // error only if the token was not allowed
//     if (c.is_finished()) stop (reason: document complete)
//   when the sampler picked an end-of-generation token: c.accept() takes it only if the
//     document is complete (allowed() contains EOG ids exactly then), and the sequence
//     stops as usual; a token budget that runs out leaves c.is_complete() false.
//   c.value() -> the parsed document (nlohmann::ordered_json), validated against the
//     schema; c.text() -> its bytes.
//
// Contract
// - allowed() is exactly the set of tokens t such that the document so far followed by
//   t's bytes can still be completed into a valid document in the generation form; EOG
//   ids are in it iff the document is complete. It is never empty before is_finished().
//   Special/control tokens are never in it.
// - Masks are cached per automaton state in the CompiledConstraint, shared by every
//   sequence using it: a top-frame cache (the tokens a frame takes without ending)
//   plus a whole-state cache. A miss walks the vocabulary trie, pruning dead prefixes;
//   a hit costs a copy of the mask. stats() reports both.
// - Thread-safety: CompiledConstraint and TokenTrie are shared and thread-safe (the
//   caches are behind a mutex). A JsonConstraint belongs to one sequence: not
//   thread-safe, but different sequences' constraints may be used from different
//   threads (e.g. masks for a batch computed in parallel).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.hpp"
#include "model/json_grammar.hpp"
#include "model/token_mask.hpp"

namespace arbor::model {

struct ConstraintStats {
  std::uint64_t masks = 0;         // mask computations asked for
  std::uint64_t state_hits = 0;    // answered by the whole-state cache
  std::uint64_t frame_hits = 0;    // top frames found in the frame cache
  std::uint64_t frame_misses = 0;  // top frames that needed a trie walk
  std::uint64_t uncached = 0;      // states that depend on the text (additional keys)
  std::uint64_t trie_nodes = 0;    // trie nodes visited by all walks
};

class CompiledConstraint {
 public:
  static Result<std::shared_ptr<const CompiledConstraint>> compile(const Json& schema,
                                                                   std::shared_ptr<const TokenTrie> vocabulary,
                                                                   std::vector<SchemaError>* errors = nullptr);
  static Result<std::shared_ptr<const CompiledConstraint>> compile(std::string_view schema_text,
                                                                   std::shared_ptr<const TokenTrie> vocabulary,
                                                                   std::vector<SchemaError>* errors = nullptr);
  static std::shared_ptr<const CompiledConstraint> create(std::shared_ptr<const JsonGrammar> grammar,
                                                          std::shared_ptr<const TokenTrie> vocabulary);

  const JsonGrammar& grammar() const { return *grammar_; }
  const TokenTrie& vocabulary() const { return *vocabulary_; }

  // The allowed tokens in `state`, reached by the document bytes `document`.
  void mask(const MatchState& state, std::string_view document, TokenMask& out) const;
  // The reference: every trie token checked by advancing the automaton over its bytes.
  // O(vocabulary); for tests.
  void mask_brute_force(const MatchState& state, std::string_view document, TokenMask& out) const;

  ConstraintStats stats() const;
  // Drops every cached mask (the caches also drop themselves past a size limit).
  void clear_caches() const;

 private:
  CompiledConstraint(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const TokenTrie> vocabulary);

  struct FrameEntry {
    TokenMask allowed;                   // tokens taken without leaving the frame
    std::vector<std::uint32_t> pending;  // trie nodes where the frame may end: the
                                         // parent continues from there
  };
  struct KeyHash {
    std::size_t operator()(const std::vector<std::uint32_t>& k) const;
  };
  class Walker;

  std::shared_ptr<const FrameEntry> frame_entry(const Frame& frame, Walker& walker) const;
  Frame cache_frame(const Frame& frame) const;

  std::shared_ptr<const JsonGrammar> grammar_;
  std::shared_ptr<const TokenTrie> vocabulary_;
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::vector<std::uint32_t>, std::shared_ptr<const FrameEntry>, KeyHash> frames_;
  mutable std::unordered_map<std::vector<std::uint32_t>, TokenMask, KeyHash> states_;
  mutable ConstraintStats stats_;
};

class JsonConstraint {
 public:
  explicit JsonConstraint(std::shared_ptr<const CompiledConstraint> compiled);

  // The tokens allowed next (computed on first use after each accept).
  const TokenMask& allowed();
  // Sets disallowed logits to -infinity.
  void apply(std::span<float> logits) { allowed().apply(logits); }
  // Advances by one sampled token. invalid_argument (and no change) when the token is
  // not allowed: a special token, bytes that cannot continue the document, an EOG id
  // before the document is complete, or anything after the end.
  Result<void> accept(std::int32_t token);

  bool is_complete() const;   // the document may end here (EOG is allowed)
  bool is_finished() const;   // it must end here, or an EOG token ended it
  const std::string& text() const { return text_; }
  std::int32_t num_tokens() const { return num_tokens_; }
  // The document parsed and validated against the schema. invalid_argument when it is
  // not complete (e.g. the token budget ran out); never fails for a complete one.
  Result<Json> value() const;

  const CompiledConstraint& compiled() const { return *compiled_; }
  const MatchState& state() const { return state_; }

 private:
  std::shared_ptr<const CompiledConstraint> compiled_;
  MatchState state_;
  std::string text_;
  TokenMask mask_;
  bool mask_valid_ = false;
  bool ended_ = false;  // an EOG token was accepted
  std::int32_t num_tokens_ = 0;
};

}  // namespace arbor::model

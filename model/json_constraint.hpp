// Constrained decoding: generation that can only produce JSON valid against a JSON
// Schema. This is the subsystem's interface header; the layers below it are
// json_schema.hpp (schema compiler + validator, JSON-pointer errors), json_grammar.hpp
// (the byte automaton, the enforced keywords and the generation form: compact JSON,
// declared properties in schema order) and token_mask.hpp (token sets, the vocabulary
// trie).
//
// Use (a scheduler such as the cache actor):
//
//   auto vocab = ConstraintVocabulary::build(model.tokenizer());   // once per model (~40 ms)
//   auto compiled = CompiledConstraint::parse(schema_text, vocab); // once per schema (< 1 ms
//                                                                  // typically; cache it by text)
//   if (!compiled) -> reject the request (HTTP 400, workflow validation error):
//                     compiled.error() names every keyword it cannot enforce with its
//                     JSON pointer; nothing is silently ignored
//   JsonConstraint c(*compiled);                                   // per sequence
//   each decode step, for each constrained sequence's logits row:
//     token = sampler.sample(row, c.allowed());   // Sampler hook; or c.apply(row) then sample
//     c.accept(token);                            // fails only for a token not in allowed()
//     if (c.is_finished()) stop, reason "document complete" (nothing may follow)
//   end of generation: allowed() contains the EOG ids exactly when the document is
//     complete, so a sampled EOG stops the sequence as usual (accept() takes it); a
//     token budget that runs out leaves is_complete() false and value() an error.
//   c.value() -> the document parsed (nlohmann::ordered_json, keys in written order)
//     and validated against the schema; c.text() -> its bytes (also the sequence's
//     output text: the constraint sees raw token bytes, as StopChecker does).
//   A batch: one allowed() per constrained row; rows are independent, so they may be
//   computed in parallel. Prefill needs nothing: a constraint starts at the first
//   generated token (put any opening text in the prompt, not in the document).
//
// Contract
// - allowed() is exactly the set of tokens t such that the document so far followed by
//   t's bytes can still be completed into a valid document in the generation form; EOG
//   ids are in it iff the document is complete. It is never empty before is_finished().
//   Special/control tokens are never in it. Tested against the brute-force reference
//   (mask_brute_force) on the real vocabulary.
// - Cost: masks are cached in the CompiledConstraint, shared by every sequence using
//   it: per whole automaton state, and per top frame (the tokens a frame takes without
//   ending, plus the trie nodes where its parent must continue). Pattern-free strings
//   (the long text values) use the vocabulary's precomputed string profile and no walk
//   at all. A miss walks the vocabulary trie with the automaton, pruning dead
//   prefixes; a hit copies a vocabulary-sized bitset. stats() reports hits and walks.
//   Measured (bench/constrained_bench, SmolLM2-135M, 2 threads): mask time under 1% of
//   the decode step at batch 1 and 8.
// - Thread-safety: ConstraintVocabulary and CompiledConstraint are shared and
//   thread-safe (caches behind a mutex). A JsonConstraint belongs to one sequence: not
//   thread-safe, but different sequences' constraints may be used from different
//   threads at once.
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

struct JsonStringProfile;

// Once per model: the vocabulary as a byte trie of token pieces, and what JSON strings
// make of it (for every token: how many code points it adds inside a string, or after
// how many it closes one), shared by every schema. Immutable, thread-safe.
class ConstraintVocabulary {
 public:
  static std::shared_ptr<const ConstraintVocabulary> build(const Tokenizer& tokenizer);
  static std::shared_ptr<const ConstraintVocabulary> build(std::shared_ptr<const TokenTrie> trie);
  ~ConstraintVocabulary();

  const TokenTrie& trie() const { return *trie_; }
  std::int32_t vocab_size() const { return trie_->vocab_size(); }

 private:
  friend class CompiledConstraint;
  ConstraintVocabulary() = default;
  std::shared_ptr<const TokenTrie> trie_;
  std::unique_ptr<const JsonStringProfile> strings_;
};

struct ConstraintStats {
  std::uint64_t masks = 0;         // mask computations asked for
  std::uint64_t state_hits = 0;    // answered by the whole-state cache
  std::uint64_t frame_hits = 0;    // top frames found in the frame cache
  std::uint64_t frame_misses = 0;  // top frames that needed a trie walk
  std::uint64_t trie_nodes = 0;    // trie nodes visited by all walks
};

class CompiledConstraint {
 public:
  static Result<std::shared_ptr<const CompiledConstraint>> compile(const Json& schema,
                                                                   std::shared_ptr<const ConstraintVocabulary> vocabulary,
                                                                   std::vector<SchemaError>* errors = nullptr);
  // The schema as JSON text (key order kept: it is the generation order).
  static Result<std::shared_ptr<const CompiledConstraint>> parse(std::string_view schema_text,
                                                                   std::shared_ptr<const ConstraintVocabulary> vocabulary,
                                                                   std::vector<SchemaError>* errors = nullptr);
  static std::shared_ptr<const CompiledConstraint> create(std::shared_ptr<const JsonGrammar> grammar,
                                                          std::shared_ptr<const ConstraintVocabulary> vocabulary);

  const JsonGrammar& grammar() const { return *grammar_; }
  const ConstraintVocabulary& vocabulary() const { return *vocabulary_; }
  const TokenTrie& trie() const { return vocabulary_->trie(); }

  // The allowed tokens in `state`, reached by the document bytes `document`.
  void mask(const MatchState& state, std::string_view document, TokenMask& out) const;
  // The reference: every trie token checked by advancing the automaton over its bytes.
  // O(vocabulary); for tests.
  void mask_brute_force(const MatchState& state, std::string_view document, TokenMask& out) const;

  ConstraintStats stats() const;
  // Drops every cached mask (the caches also drop themselves past a size limit).
  void clear_caches() const;

 private:
  CompiledConstraint(std::shared_ptr<const JsonGrammar> grammar, std::shared_ptr<const ConstraintVocabulary> vocabulary);

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
  std::vector<std::uint32_t> cache_key(const Frame& frame) const;
  bool uses_profile(const Frame& frame) const;
  void mask_profiled_string(std::span<const Frame> stack, std::string_view document, Walker& walker,
                            TokenMask& out) const;

  std::shared_ptr<const JsonGrammar> grammar_;
  std::shared_ptr<const ConstraintVocabulary> vocabulary_;
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

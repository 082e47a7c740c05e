// ConstraintCache: the compiled JSON Schema constraints of one BatchEngine (constrained
// decoding, model/json_constraint.hpp), keyed by schema text. Every request with the
// same schema (the instances of a fanned-out agent, repeated API calls) shares one
// CompiledConstraint and so its token-mask caches: a schema compiles once, not once
// per request, and its masks are computed once for all of them.
//
// The vocabulary trie (~40 ms for SmolLM2) is built on the first constrained request.
// Bounded: at most kMaxEntries schemas; the least recently used is dropped first (a
// sequence still using it keeps it alive through its own shared_ptr).
// Not thread-safe: the BatchEngine's thread only.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>

#include "common/result.hpp"
#include "model/json_constraint.hpp"
#include "model/model.hpp"

namespace arbor::actors {

class ConstraintCache {
 public:
  static constexpr std::size_t kMaxEntries = 64;

  explicit ConstraintCache(std::shared_ptr<const model::Model> model) : model_(std::move(model)) {}

  // The compiled constraint of `schema_text`; invalid_argument naming every keyword
  // (JSON pointer) the engine cannot enforce, or the JSON error of a malformed text.
  Result<std::shared_ptr<const model::CompiledConstraint>> get(const std::string& schema_text);
  std::uint64_t num_compiled() const { return num_compiled_; }

 private:
  using Order = std::list<std::string>;  // most recently used first
  struct Entry {
    std::shared_ptr<const model::CompiledConstraint> compiled;
    Order::iterator position;
  };

  std::shared_ptr<const model::Model> model_;
  std::shared_ptr<const model::ConstraintVocabulary> vocabulary_;
  std::unordered_map<std::string, Entry> entries_;
  Order order_;
  std::uint64_t num_compiled_ = 0;
};

}  // namespace arbor::actors

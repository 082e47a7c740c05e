#include "actors/constraint_cache.hpp"

namespace arbor::actors {

Result<std::shared_ptr<const model::CompiledConstraint>> ConstraintCache::get(const std::string& schema_text) {
  if (auto it = entries_.find(schema_text); it != entries_.end()) {
    order_.splice(order_.begin(), order_, it->second.position);
    return it->second.compiled;
  }
  if (!vocabulary_) vocabulary_ = model::ConstraintVocabulary::build(model_->tokenizer());
  auto compiled = model::CompiledConstraint::parse(schema_text, vocabulary_);
  if (!compiled) return fail(ErrorCode::invalid_argument, "json_schema: " + compiled.error().message);
  ++num_compiled_;
  if (entries_.size() >= kMaxEntries) {
    entries_.erase(order_.back());
    order_.pop_back();
  }
  order_.push_front(schema_text);
  entries_.emplace(schema_text, Entry{*compiled, order_.begin()});
  return *compiled;
}

}  // namespace arbor::actors

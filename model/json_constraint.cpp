#include "model/json_constraint.hpp"

#include <algorithm>

namespace arbor::model {

namespace {

// Past these sizes a cache is emptied (each entry holds a vocabulary-sized bitset).
constexpr std::size_t kMaxFrameEntries = 4096;
constexpr std::size_t kMaxStateEntries = 4096;

std::vector<std::uint32_t> frame_key(const Frame& f) { return {f.node, f.a, f.b, f.c, f.d}; }

}  // namespace

// Walks the vocabulary trie with the automaton, depth first, pruning a subtree as soon
// as no stack survives its prefix. One MatchState buffer per depth, reused.
class CompiledConstraint::Walker {
 public:
  Walker(const JsonGrammar& grammar, const TokenTrie& trie) : grammar_(grammar), trie_(trie) {
    levels_.resize(trie.max_piece_bytes() + 2);
  }

  // Every token whose bytes, after the path to `start`, the stacks of `state` take.
  void full(const MatchState& state, std::uint32_t start, std::string_view history, TokenMask& out) {
    local_ = false;
    entry_ = nullptr;
    out_ = &out;
    history_ = history;
    run(state, start);
  }

  // Tokens a lone frame takes (entry.allowed), and the trie nodes where it may end
  // (entry.pending): from there its parent continues, which the frame cannot know.
  void local(const Frame& frame, FrameEntry& entry) {
    local_ = true;
    entry_ = &entry;
    out_ = &entry.allowed;
    history_ = {};
    MatchState start;
    start.add(std::span(&frame, 1));
    if (grammar_.can_finish(frame)) entry.pending.push_back(0);
    run(start, 0);
  }

  std::uint64_t nodes_visited = 0;

 private:
  void run(const MatchState& state, std::uint32_t start) {
    path_ = trie_.path(start);
    const std::size_t depth = path_.size();
    levels_[depth] = state;
    descend(start, depth);
  }

  void descend(std::uint32_t node, std::size_t depth) {
    for (std::uint32_t c = trie_.node(node).first_child; c != 0; c = trie_.node(c).next_sibling) {
      const std::uint8_t byte = trie_.node(c).byte;
      path_.resize(depth);
      path_.push_back(char(byte));
      MatchState& next = levels_[depth + 1];
      next.clear();
      const MatchState& here = levels_[depth];
      const TextSource text{history_, path_};
      const auto pos = std::uint32_t(history_.size() + depth);
      for (std::size_t s = 0; s < here.num_stacks(); ++s) grammar_.step(here.stack(s), byte, pos, text, next);
      ++nodes_visited;
      if (next.empty()) continue;
      if (next.num_stacks() > 1) next.canonicalise();
      for (std::int32_t t : trie_.tokens_at(c)) out_->allow(t);
      const bool ended = next.remove_empty_stacks();
      if (local_) {
        bool pending = ended;
        for (std::size_t s = 0; s < next.num_stacks() && !pending; ++s) {
          const auto st = next.stack(s);
          pending = st.size() == 1 && grammar_.can_finish(st[0]);
        }
        if (pending) entry_->pending.push_back(c);
      }
      if (!next.empty()) descend(c, depth + 1);
    }
  }

  const JsonGrammar& grammar_;
  const TokenTrie& trie_;
  std::vector<MatchState> levels_;
  std::string path_;
  std::string_view history_;
  bool local_ = false;
  FrameEntry* entry_ = nullptr;
  TokenMask* out_ = nullptr;
};

std::size_t CompiledConstraint::KeyHash::operator()(const std::vector<std::uint32_t>& k) const {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::uint32_t w : k) h = (h ^ w) * 0x100000001b3ull;
  return std::size_t(h ^ (h >> 29));
}

CompiledConstraint::CompiledConstraint(std::shared_ptr<const JsonGrammar> grammar,
                                       std::shared_ptr<const TokenTrie> vocabulary)
    : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)) {}

std::shared_ptr<const CompiledConstraint> CompiledConstraint::create(std::shared_ptr<const JsonGrammar> grammar,
                                                                     std::shared_ptr<const TokenTrie> vocabulary) {
  return std::shared_ptr<const CompiledConstraint>(new CompiledConstraint(std::move(grammar), std::move(vocabulary)));
}

Result<std::shared_ptr<const CompiledConstraint>> CompiledConstraint::compile(
    const Json& schema, std::shared_ptr<const TokenTrie> vocabulary, std::vector<SchemaError>* errors) {
  auto g = JsonGrammar::from_json(schema, errors);
  if (!g) return std::unexpected(g.error());
  return create(*g, std::move(vocabulary));
}

Result<std::shared_ptr<const CompiledConstraint>> CompiledConstraint::compile(
    std::string_view schema_text, std::shared_ptr<const TokenTrie> vocabulary, std::vector<SchemaError>* errors) {
  auto g = JsonGrammar::from_text(schema_text, errors);
  if (!g) return std::unexpected(g.error());
  return create(*g, std::move(vocabulary));
}

Frame CompiledConstraint::cache_frame(const Frame& frame) const {
  // A string under a maxLength far from both limits: every count there takes the
  // same tokens (no token is longer than max_piece_bytes code points), so one entry
  // serves them all.
  Frame f = frame;
  const GrammarNode& n = grammar_->node(f.node);
  if (n.kind == GrammarKind::string && n.string.universal && n.string.max_length && f.d == 1) {
    const std::uint64_t longest = vocabulary_->max_piece_bytes();
    if (f.c >= n.string.min_length && f.c + longest <= *n.string.max_length) f.c = std::uint32_t(n.string.min_length);
  }
  f.x0 = f.x1 = f.x2 = 0;
  return f;
}

std::shared_ptr<const CompiledConstraint::FrameEntry> CompiledConstraint::frame_entry(const Frame& frame,
                                                                                      Walker& walker) const {
  const Frame f = cache_frame(frame);
  auto key = frame_key(f);
  {
    std::lock_guard lock(mutex_);
    if (auto it = frames_.find(key); it != frames_.end()) {
      ++stats_.frame_hits;
      return it->second;
    }
  }
  auto entry = std::make_shared<FrameEntry>();
  entry->allowed.resize(vocabulary_->vocab_size());
  walker.local(f, *entry);
  std::lock_guard lock(mutex_);
  ++stats_.frame_misses;
  if (frames_.size() >= kMaxFrameEntries) frames_.clear();
  frames_.try_emplace(std::move(key), entry);
  return entry;
}

void CompiledConstraint::mask(const MatchState& state, std::string_view document, TokenMask& out) const {
  out.resize(vocabulary_->vocab_size());
  bool cacheable = true;
  for (std::size_t s = 0; s < state.num_stacks(); ++s) {
    const auto st = state.stack(s);
    if (!st.empty() && !grammar_->is_cacheable(st.back())) cacheable = false;
  }
  std::vector<std::uint32_t> key;
  if (cacheable) state.identity(key);
  {
    std::lock_guard lock(mutex_);
    ++stats_.masks;
    if (!cacheable) ++stats_.uncached;
    if (cacheable)
      if (auto it = states_.find(key); it != states_.end()) {
        ++stats_.state_hits;
        out = it->second;
        return;
      }
  }
  Walker walker(*grammar_, *vocabulary_);
  bool complete = false;
  MatchState parent;
  for (std::size_t s = 0; s < state.num_stacks(); ++s) {
    const auto st = state.stack(s);
    if (st.empty() || (st.size() == 1 && grammar_->can_finish(st[0]))) complete = true;
    if (st.empty()) continue;
    if (!grammar_->is_cacheable(st.back())) {
      MatchState one;
      one.add(st);
      walker.full(one, 0, document, out);
      continue;
    }
    const auto entry = frame_entry(st.back(), walker);
    out.unite(entry->allowed);
    if (st.size() > 1 && !entry->pending.empty()) {
      parent.clear();
      parent.add(st.first(st.size() - 1));
      for (std::uint32_t node : entry->pending) walker.full(parent, node, document, out);
    }
  }
  if (complete)
    for (std::int32_t id : vocabulary_->end_of_generation_ids())
      if (id >= 0 && id < out.size()) out.allow(id);
  std::lock_guard lock(mutex_);
  stats_.trie_nodes += walker.nodes_visited;
  if (cacheable) {
    if (states_.size() >= kMaxStateEntries) states_.clear();
    states_.try_emplace(std::move(key), out);
  }
}

void CompiledConstraint::mask_brute_force(const MatchState& state, std::string_view document, TokenMask& out) const {
  out.resize(vocabulary_->vocab_size());
  out.clear();
  const bool complete = grammar_->is_complete(state);
  for (std::int32_t id = 0; id < vocabulary_->vocab_size(); ++id) {
    if (vocabulary_->is_end_of_generation(id)) {
      if (complete) out.allow(id);
      continue;
    }
    const auto piece = vocabulary_->piece(id);
    if (piece.empty()) continue;
    MatchState next = state;
    if (grammar_->advance(next, piece, document)) out.allow(id);
  }
}

ConstraintStats CompiledConstraint::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void CompiledConstraint::clear_caches() const {
  std::lock_guard lock(mutex_);
  frames_.clear();
  states_.clear();
}

JsonConstraint::JsonConstraint(std::shared_ptr<const CompiledConstraint> compiled)
    : compiled_(std::move(compiled)), state_(compiled_->grammar().initial_state()) {
  mask_.resize(compiled_->vocabulary().vocab_size());
}

const TokenMask& JsonConstraint::allowed() {
  if (mask_valid_) return mask_;
  if (ended_ || compiled_->grammar().is_finished(state_)) {
    mask_.resize(compiled_->vocabulary().vocab_size());
  } else {
    compiled_->mask(state_, text_, mask_);
  }
  mask_valid_ = true;
  return mask_;
}

Result<void> JsonConstraint::accept(std::int32_t token) {
  const TokenTrie& vocab = compiled_->vocabulary();
  const JsonGrammar& grammar = compiled_->grammar();
  if (ended_) return fail(ErrorCode::invalid_argument, "constrained output: token after the end of generation");
  if (vocab.is_end_of_generation(token)) {
    if (!grammar.is_complete(state_))
      return fail(ErrorCode::invalid_argument, "constrained output: end of generation before the JSON document is "
                                               "complete (after '" + text_ + "')");
    ended_ = true;
  } else {
    const auto piece = vocab.piece(token);
    if (piece.empty())
      return fail(ErrorCode::invalid_argument,
                  "constrained output: token " + std::to_string(token) + " is a special token, never allowed inside "
                                                                          "a JSON document");
    MatchState next = state_;
    if (!grammar.advance(next, piece, text_))
      return fail(ErrorCode::invalid_argument, "constrained output: token " + std::to_string(token) + " ('" +
                                                   std::string(piece) + "') cannot continue '" + text_ +
                                                   "' towards a document valid against the schema");
    state_ = std::move(next);
    text_.append(piece);
  }
  ++num_tokens_;
  mask_valid_ = false;
  return {};
}

bool JsonConstraint::is_complete() const { return ended_ || compiled_->grammar().is_complete(state_); }

bool JsonConstraint::is_finished() const { return ended_ || compiled_->grammar().is_finished(state_); }

Result<Json> JsonConstraint::value() const {
  if (!is_complete())
    return fail(ErrorCode::invalid_argument,
                "constrained output is not a complete JSON document (generation stopped early): '" + text_ + "'");
  Json value = Json::parse(text_, nullptr, false);
  if (value.is_discarded())
    return fail(ErrorCode::internal, "constrained output does not parse as JSON: '" + text_ + "'");
  auto errors = compiled_->grammar().schema().validate(value);
  if (!errors.empty())
    return fail(ErrorCode::internal, "constrained output does not validate: " + describe(errors));
  return value;
}

}  // namespace arbor::model

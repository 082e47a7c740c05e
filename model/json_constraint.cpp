#include "model/json_constraint.hpp"

#include <algorithm>
#include <array>
#include <map>

#include "model/json_grammar_internal.hpp"

namespace arbor::model {

namespace {

// Past these sizes a cache is emptied (each entry holds a vocabulary-sized bitset).
constexpr std::size_t kMaxFrameEntries = 4096;
constexpr std::size_t kMaxStateEntries = 4096;

std::vector<std::uint32_t> frame_key(const Frame& f) { return {f.node, f.a, f.b, f.c, f.d}; }

}  // namespace

// Pattern-free strings take the same tokens whatever the schema: how many code points a
// token adds while staying inside the string, or after how many it closes the string.
// Computed once per vocabulary (ConstraintVocabulary) from the lexer's boundary state.
struct JsonStringProfile {
  std::vector<TokenMask> stay_upto;                     // [k]: stay inside with <= k code points
  std::vector<std::vector<std::int32_t>> close_tokens;  // [k]: end right after the closing quote
  std::vector<std::vector<std::uint32_t>> close_nodes;  // [k]: after the quote, with children
  std::vector<std::uint8_t> closes_below;               // [node]: a closing quote in its subtree

  explicit JsonStringProfile(const TokenTrie& trie) {
    const std::size_t max_k = trie.max_piece_bytes() + 1;
    std::vector<TokenMask> stay(max_k + 1, TokenMask(trie.vocab_size()));
    close_tokens.resize(max_k + 1);
    close_nodes.resize(max_k + 1);
    closes_below.assign(trie.num_nodes(), 0);
    const CharDfa any = CharDfa::any_string();
    dfs(trie, any, 0, grammar_detail::kLexNormalState, 0, stay);
    stay_upto = std::move(stay);
    for (std::size_t k = 1; k < stay_upto.size(); ++k) stay_upto[k].unite(stay_upto[k - 1]);
  }

  bool dfs(const TokenTrie& trie, const CharDfa& any, std::uint32_t node, std::uint32_t lex, std::uint32_t k,
           std::vector<TokenMask>& stay) {
    bool closes = false;
    for (std::uint32_t ch = trie.node(node).first_child; ch != 0; ch = trie.node(ch).next_sibling) {
      std::uint32_t state = 0, lex2 = lex;
      const auto r = grammar_detail::string_byte_unbounded(any, state, lex2, trie.node(ch).byte);
      if (r == grammar_detail::StringStep::dead) continue;
      if (r == grammar_detail::StringStep::closed) {
        for (std::int32_t t : trie.tokens_at(ch)) close_tokens[k].push_back(t);
        if (trie.node(ch).first_child != 0) close_nodes[k].push_back(ch);
        closes_below[ch] = 1;
        closes = true;
        continue;
      }
      const std::uint32_t k2 = k + (grammar_detail::lexer_at_boundary(lex2) ? 1 : 0);
      const std::uint32_t effective = k2 + (grammar_detail::lexer_at_boundary(lex2) ? 0 : 1);
      for (std::int32_t t : trie.tokens_at(ch)) stay[effective].allow(t);
      if (trie.node(ch).first_child != 0 && dfs(trie, any, ch, lex2, k2, stay)) closes_below[ch] = 1, closes = true;
    }
    return closes;
  }
};

// Walks the vocabulary trie with the automaton, depth first, pruning a subtree as soon
// as no stack survives its prefix. One MatchState buffer per depth, reused.
class CompiledConstraint::Walker {
 public:
  Walker(const JsonGrammar& grammar, const TokenTrie& trie, const JsonStringProfile& strings)
      : grammar_(grammar), trie_(trie), strings_(strings) {
    levels_.resize(trie.max_piece_bytes() + 2);
  }

  // Every token whose bytes, after the path to `start`, the stacks of `state` take.
  void full(const MatchState& state, std::uint32_t start, std::string_view history, TokenMask& out) {
    begin(false, nullptr, &out, history);
    enter(state, start);
    descend(start, path_.size());
  }

  // As full(), from trie node `start`, entering only children whose byte `state` takes:
  // `viable[b]` caches that per byte (-1: not known yet).
  void continue_from(const MatchState& state, std::uint32_t start, std::string_view history, TokenMask& out,
                     std::array<std::int8_t, 256>& viable) {
    begin(false, nullptr, &out, history);
    bool entered = false;
    for (std::uint32_t c = trie_.node(start).first_child; c != 0; c = trie_.node(c).next_sibling) {
      const std::uint8_t byte = trie_.node(c).byte;
      if (viable[byte] < 0) {
        scratch_.clear();
        const TextSource text{history, {}};
        for (std::size_t s = 0; s < state.num_stacks(); ++s)
          grammar_.step(state.stack(s), byte, std::uint32_t(history.size()), text, scratch_);
        viable[byte] = scratch_.empty() ? 0 : 1;
      }
      if (!viable[byte]) continue;
      if (!entered) enter(state, start), entered = true;
      visit(c, trie_.node(start).depth);
    }
  }

  // Tokens a lone frame takes (entry.allowed), and the trie nodes with children where
  // it may end (entry.pending): from there its parent continues, which the frame
  // cannot know.
  void local(const Frame& frame, FrameEntry& entry) {
    begin(true, &entry, &entry.allowed, {});
    const GrammarNode& n = grammar_.node(frame.node);
    if (n.kind == GrammarKind::string && frame.d == 1) {
      string_dfs(n.string, 0, frame.a, frame.b, frame.c);
      return;
    }
    if (n.kind == GrammarKind::object && (frame.a & 15) == grammar_detail::kObjKey) {
      const std::uint32_t slot = frame.a >> 8;
      // A key that may become an additional one accepts any text: only where the quote
      // closes it does its automaton matter. The tokens that stay inside come from the
      // vocabulary's string profile; the walk visits only paths to a closing quote.
      const bool any_text = n.object.additional != kNoGrammarNode && !n.object.required_from[slot];
      const bool closings_only = any_text && grammar_detail::lexer_at_boundary(frame.d);
      if (closings_only) out_->unite(strings_.stay_upto.back());
      key_dfs(frame, grammar_.key_dfa(frame.node, slot, frame.b), 0, frame.c, frame.d, closings_only);
      return;
    }
    MatchState start;
    start.add(std::span(&frame, 1));
    if (grammar_.can_finish(frame)) entry.pending.push_back(0);
    enter(start, 0);
    descend(0, 0);
  }

  std::uint64_t nodes_visited = 0;

 private:
  void begin(bool local, FrameEntry* entry, TokenMask* out, std::string_view history) {
    local_ = local;
    entry_ = entry;
    out_ = out;
    history_ = history;
  }

  void enter(const MatchState& state, std::uint32_t start) {
    const std::size_t depth = trie_.node(start).depth;
    path_.resize(depth);
    for (std::uint32_t n = start; n != 0; n = trie_.node(n).parent) path_[trie_.node(n).depth - 1] = char(trie_.node(n).byte);
    levels_[depth] = state;
  }

  void descend(std::uint32_t node, std::size_t depth) {
    for (std::uint32_t c = trie_.node(node).first_child; c != 0; c = trie_.node(c).next_sibling) visit(c, depth);
  }

  // Steps every stack at `depth` over child c's byte; records tokens and descends.
  void visit(std::uint32_t c, std::size_t depth) {
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
    if (next.empty()) return;
    if (next.num_stacks() > 1) next.canonicalise();
    for (std::int32_t t : trie_.tokens_at(c)) out_->allow(t);
    const bool ended = next.remove_empty_stacks();
    if (local_) {
      bool pending = ended;
      for (std::size_t s = 0; s < next.num_stacks() && !pending; ++s) {
        const auto st = next.stack(s);
        pending = st.size() == 1 && grammar_.can_finish(st[0]);
      }
      if (pending && trie_.node(c).first_child != 0) entry_->pending.push_back(c);
    }
    if (!next.empty()) descend(c, depth + 1);
  }

  // The local walk of a string frame, without automaton states: the string lexer only.
  void string_dfs(const StringSpec& spec, std::uint32_t node, std::uint32_t a, std::uint32_t b, std::uint32_t c) {
    for (std::uint32_t ch = trie_.node(node).first_child; ch != 0; ch = trie_.node(ch).next_sibling) {
      std::uint32_t a2 = a, b2 = b, c2 = c;
      const std::uint8_t byte = trie_.node(ch).byte;
      grammar_detail::StringStep r;
      if (b == 0 && byte >= 0x20 && byte < 0x80 && byte != '"' && byte != '\\' && spec.live.empty() &&
          !spec.max_length && c2 >= spec.min_length) {
        // Plain ASCII between code points, no length left to check: the DFA alone.
        a2 = spec.dfa->next(a, byte);
        r = a2 == kDeadState ? grammar_detail::StringStep::dead : grammar_detail::StringStep::ok;
      } else {
        r = grammar_detail::string_byte(spec, a2, b2, c2, byte);
      }
      ++nodes_visited;
      if (r == grammar_detail::StringStep::dead) continue;
      for (std::int32_t t : trie_.tokens_at(ch)) out_->allow(t);
      const bool has_children = trie_.node(ch).first_child != 0;
      if (r == grammar_detail::StringStep::closed) {
        if (has_children) entry_->pending.push_back(ch);
      } else if (has_children) {
        string_dfs(spec, ch, a2, b2, c2);
      }
    }
  }

  // The local walk of an object frame inside a key: the key's characters with the
  // lexer only, then the automaton from the closing quote on.
  void key_dfs(const Frame& frame, const CharDfa& dfa, std::uint32_t node, std::uint32_t state, std::uint32_t lex,
               bool closings_only) {
    for (std::uint32_t ch = trie_.node(node).first_child; ch != 0; ch = trie_.node(ch).next_sibling) {
      const std::uint8_t byte = trie_.node(ch).byte;
      std::uint32_t state2 = state, lex2 = lex;
      grammar_detail::StringStep r;
      if (lex == 0 && byte >= 0x20 && byte < 0x80 && byte != '"' && byte != '\\') {
        // Plain ASCII between code points (most of the trie): the DFA alone decides.
        state2 = dfa.next(state, byte);
        r = state2 == kDeadState ? grammar_detail::StringStep::dead : grammar_detail::StringStep::ok;
      } else {
        r = grammar_detail::string_byte_unbounded(dfa, state2, lex2, byte);
      }
      ++nodes_visited;
      if (r == grammar_detail::StringStep::dead) continue;
      const bool has_children = trie_.node(ch).first_child != 0;
      if (r == grammar_detail::StringStep::ok) {
        if (closings_only) {
          if (has_children && strings_.closes_below[ch]) key_dfs(frame, dfa, ch, state2, lex2, true);
          continue;
        }
        for (std::int32_t t : trie_.tokens_at(ch)) out_->allow(t);
        if (has_children) key_dfs(frame, dfa, ch, state2, lex2, false);
        continue;
      }
      Frame before = frame;
      before.c = state, before.d = lex;
      const std::size_t depth = trie_.node(node).depth;
      MatchState& here = levels_[depth];
      here.clear();
      here.add(std::span(&before, 1));
      visit(ch, depth);  // the closing quote, through the automaton
    }
  }

  const JsonGrammar& grammar_;
  const TokenTrie& trie_;
  const JsonStringProfile& strings_;
  std::vector<MatchState> levels_;
  MatchState scratch_;
  std::string path_;
  std::string_view history_;
  bool local_ = false;
  FrameEntry* entry_ = nullptr;
  TokenMask* out_ = nullptr;
};

std::shared_ptr<const ConstraintVocabulary> ConstraintVocabulary::build(const Tokenizer& tokenizer) {
  return build(TokenTrie::build(tokenizer));
}

std::shared_ptr<const ConstraintVocabulary> ConstraintVocabulary::build(std::shared_ptr<const TokenTrie> trie) {
  auto v = std::shared_ptr<ConstraintVocabulary>(new ConstraintVocabulary());
  v->strings_ = std::make_unique<const JsonStringProfile>(*trie);
  v->trie_ = std::move(trie);
  return v;
}

ConstraintVocabulary::~ConstraintVocabulary() = default;

std::size_t CompiledConstraint::KeyHash::operator()(const std::vector<std::uint32_t>& k) const {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::uint32_t w : k) h = (h ^ w) * 0x100000001b3ull;
  return std::size_t(h ^ (h >> 29));
}

CompiledConstraint::CompiledConstraint(std::shared_ptr<const JsonGrammar> grammar,
                                       std::shared_ptr<const ConstraintVocabulary> vocabulary)
    : grammar_(std::move(grammar)), vocabulary_(std::move(vocabulary)) {}

std::shared_ptr<const CompiledConstraint> CompiledConstraint::create(std::shared_ptr<const JsonGrammar> grammar,
                                                                     std::shared_ptr<const ConstraintVocabulary> vocabulary) {
  return std::shared_ptr<const CompiledConstraint>(new CompiledConstraint(std::move(grammar), std::move(vocabulary)));
}

Result<std::shared_ptr<const CompiledConstraint>> CompiledConstraint::compile(
    const Json& schema, std::shared_ptr<const ConstraintVocabulary> vocabulary, std::vector<SchemaError>* errors) {
  auto g = JsonGrammar::from_json(schema, errors);
  if (!g) return std::unexpected(g.error());
  return create(*g, std::move(vocabulary));
}

Result<std::shared_ptr<const CompiledConstraint>> CompiledConstraint::parse(
    std::string_view schema_text, std::shared_ptr<const ConstraintVocabulary> vocabulary, std::vector<SchemaError>* errors) {
  auto g = JsonGrammar::from_text(schema_text, errors);
  if (!g) return std::unexpected(g.error());
  return create(*g, std::move(vocabulary));
}

std::vector<std::uint32_t> CompiledConstraint::cache_key(const Frame& frame) const {
  Frame f = frame;
  const GrammarNode& n = grammar_->node(f.node);
  if (n.kind == GrammarKind::string && n.string.universal && n.string.max_length && f.d == 1) {
    // A string under a maxLength far from both limits: every count there takes the
    // same tokens (no token is longer than max_piece_bytes code points).
    const std::uint64_t longest = trie().max_piece_bytes();
    if (f.c >= n.string.min_length && f.c + longest <= *n.string.max_length) f.c = std::uint32_t(n.string.min_length);
  }
  if (n.kind == GrammarKind::object && (f.a & 15) == grammar_detail::kObjKey) {
    // A key that already differs from every name and written key: what follows does
    // not depend on which keys were written.
    const CharDfa& dfa = grammar_->key_dfa(f.node, f.a >> 8, f.b);
    const auto edges = dfa.edges(f.c);
    if (dfa.label(f.c) == grammar_detail::kAdditionalKeyLabel && edges.size() == 2 && edges[0].lo == 0 &&
        edges[0].target == f.c && edges[1].target == f.c && edges[1].hi == kMaxCodePoint)
      f.b = 0, f.c = 0xFFFFFFFEu;
  }
  return frame_key(f);
}

bool CompiledConstraint::uses_profile(const Frame& f) const {
  const GrammarNode& n = grammar_->node(f.node);
  return n.kind == GrammarKind::string && n.string.universal && f.d == 1 && grammar_detail::lexer_at_boundary(f.b);
}

void CompiledConstraint::mask_profiled_string(std::span<const Frame> stack, std::string_view document,
                                              Walker& walker, TokenMask& out) const {
  const JsonStringProfile& p = *vocabulary_->strings_;
  const Frame& f = stack.back();
  const StringSpec& spec = grammar_->node(f.node).string;
  const std::uint64_t max_k = p.stay_upto.size() - 1;
  const std::uint64_t room = spec.max_length ? *spec.max_length - f.c : max_k;  // code points left
  const std::uint64_t hi = std::min(room, max_k), lo = spec.min_length > f.c ? spec.min_length - f.c : 0;
  {
    std::lock_guard lock(mutex_);
    ++stats_.frame_hits;
  }
  out.unite(p.stay_upto[hi]);
  MatchState parent;
  if (stack.size() > 1) parent.add(stack.first(stack.size() - 1));
  std::array<std::int8_t, 256> viable;
  viable.fill(-1);
  for (std::uint64_t k = lo; k <= hi; ++k) {
    for (std::int32_t t : p.close_tokens[k]) out.allow(t);
    if (stack.size() > 1)
      for (std::uint32_t node : p.close_nodes[k]) walker.continue_from(parent, node, document, out, viable);
  }
}

std::shared_ptr<const CompiledConstraint::FrameEntry> CompiledConstraint::frame_entry(const Frame& frame,
                                                                                      Walker& walker) const {
  Frame f = frame;
  f.x0 = f.x1 = f.x2 = 0;
  auto key = cache_key(f);
  {
    std::lock_guard lock(mutex_);
    if (auto it = frames_.find(key); it != frames_.end()) {
      ++stats_.frame_hits;
      return it->second;
    }
  }
  auto entry = std::make_shared<FrameEntry>();
  entry->allowed.resize(trie().vocab_size());
  walker.local(f, *entry);
  std::lock_guard lock(mutex_);
  ++stats_.frame_misses;
  if (frames_.size() >= kMaxFrameEntries) frames_.clear();
  frames_.try_emplace(std::move(key), entry);
  return entry;
}

void CompiledConstraint::mask(const MatchState& state, std::string_view document, TokenMask& out) const {
  out.resize(trie().vocab_size());
  std::vector<std::uint32_t> key;
  state.identity(key);
  {
    std::lock_guard lock(mutex_);
    ++stats_.masks;
    if (auto it = states_.find(key); it != states_.end()) {
      ++stats_.state_hits;
      out = it->second;
      return;
    }
  }
  Walker walker(*grammar_, trie(), *vocabulary_->strings_);
  bool complete = false;
  MatchState parent;
  for (std::size_t s = 0; s < state.num_stacks(); ++s) {
    const auto st = state.stack(s);
    if (st.empty() || (st.size() == 1 && grammar_->can_finish(st[0]))) complete = true;
    if (st.empty()) continue;
    if (uses_profile(st.back())) {
      mask_profiled_string(st, document, walker, out);
      continue;
    }
    const auto entry = frame_entry(st.back(), walker);
    out.unite(entry->allowed);
    if (st.size() > 1 && !entry->pending.empty()) {
      parent.clear();
      parent.add(st.first(st.size() - 1));
      std::array<std::int8_t, 256> viable;
      viable.fill(-1);
      for (std::uint32_t node : entry->pending) walker.continue_from(parent, node, document, out, viable);
    }
  }
  if (complete)
    for (std::int32_t id : trie().end_of_generation_ids())
      if (id >= 0 && id < out.size()) out.allow(id);
  std::lock_guard lock(mutex_);
  stats_.trie_nodes += walker.nodes_visited;
  if (states_.size() >= kMaxStateEntries) states_.clear();
  states_.try_emplace(std::move(key), out);
}

void CompiledConstraint::mask_brute_force(const MatchState& state, std::string_view document, TokenMask& out) const {
  out.resize(trie().vocab_size());
  out.clear();
  const bool complete = grammar_->is_complete(state);
  for (std::int32_t id = 0; id < trie().vocab_size(); ++id) {
    if (trie().is_end_of_generation(id)) {
      if (complete) out.allow(id);
      continue;
    }
    const auto piece = trie().piece(id);
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
  mask_.resize(compiled_->trie().vocab_size());
}

const TokenMask& JsonConstraint::allowed() {
  if (mask_valid_) return mask_;
  if (ended_ || compiled_->grammar().is_finished(state_)) {
    mask_.resize(compiled_->trie().vocab_size());
  } else {
    compiled_->mask(state_, text_, mask_);
  }
  mask_valid_ = true;
  return mask_;
}

Result<void> JsonConstraint::accept(std::int32_t token) {
  const TokenTrie& vocab = compiled_->trie();
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

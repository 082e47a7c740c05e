#include "model/token_mask.hpp"

#include <algorithm>
#include <bit>
#include <limits>

namespace arbor::model {

std::int32_t TokenMask::count() const {
  std::int32_t n = 0;
  for (auto w : words_) n += std::popcount(w);
  return n;
}

std::vector<std::int32_t> TokenMask::ids() const {
  std::vector<std::int32_t> out;
  for (std::size_t i = 0; i < words_.size(); ++i)
    for (std::uint64_t w = words_[i]; w; w &= w - 1) out.push_back(std::int32_t(i * 64 + std::size_t(std::countr_zero(w))));
  return out;
}

void apply_token_mask(std::span<const std::uint64_t> words, std::span<float> logits) {
  const float minus_inf = -std::numeric_limits<float>::infinity();
  const std::size_t n = std::min(logits.size(), words.size() * 64);
  for (std::size_t i = 0; i < n; i += 64) {
    const std::uint64_t w = words[i >> 6];
    if (w == ~0ull) continue;
    const std::size_t end = std::min(n, i + 64);
    for (std::size_t j = i; j < end; ++j)
      if (!((w >> (j - i)) & 1)) logits[j] = minus_inf;
  }
  for (std::size_t j = n; j < logits.size(); ++j) logits[j] = minus_inf;
}

std::shared_ptr<const TokenTrie> TokenTrie::build(const Tokenizer& tokenizer) {
  auto t = std::make_shared<TokenTrie>();
  t->vocab_size_ = tokenizer.vocab_size();
  t->eog_ids_ = tokenizer.end_of_generation_ids();
  std::sort(t->eog_ids_.begin(), t->eog_ids_.end());
  t->pieces_.resize(std::size_t(t->vocab_size_));
  std::vector<std::pair<std::string, std::int32_t>> entries;
  for (std::int32_t id = 0; id < t->vocab_size_; ++id) {
    const TokenType type = tokenizer.token_type(id);
    if (type == TokenType::control || type == TokenType::unknown || type == TokenType::unused) continue;
    if (tokenizer.is_end_of_generation(id)) continue;
    std::string piece = tokenizer.token_to_piece(id);
    if (piece.empty()) continue;
    t->pieces_[std::size_t(id)] = piece;
    t->max_piece_bytes_ = std::max(t->max_piece_bytes_, piece.size());
    entries.emplace_back(std::move(piece), id);
  }
  std::sort(entries.begin(), entries.end());
  // Sorted insertion: the path of the previous piece is the only one still open.
  t->nodes_.emplace_back();
  std::vector<std::uint32_t> path = {0};  // node at each depth of the previous piece
  std::vector<std::uint32_t> last_child;  // per node: its last child, for sibling links
  last_child.push_back(0);
  std::string previous;
  std::vector<std::vector<std::int32_t>> tokens_of(1);
  for (const auto& [piece, id] : entries) {
    std::size_t common = 0;
    while (common < previous.size() && common < piece.size() && previous[common] == piece[common]) ++common;
    path.resize(common + 1);
    for (std::size_t d = common; d < piece.size(); ++d) {
      const std::uint32_t parent = path[d];
      const std::uint32_t child = std::uint32_t(t->nodes_.size());
      Node n;
      n.parent = parent;
      n.depth = std::uint16_t(d + 1);
      n.byte = std::uint8_t(piece[d]);
      t->nodes_.push_back(n);
      tokens_of.emplace_back();
      last_child.push_back(0);
      if (last_child[parent] == 0) t->nodes_[parent].first_child = child;
      else t->nodes_[last_child[parent]].next_sibling = child;
      last_child[parent] = child;
      path.push_back(child);
    }
    tokens_of[path[piece.size()]].push_back(id);
    previous = piece;
  }
  for (std::size_t i = 0; i < t->nodes_.size(); ++i) {
    t->nodes_[i].first_token = std::uint32_t(t->token_ids_.size());
    t->nodes_[i].num_tokens = std::uint32_t(tokens_of[i].size());
    t->token_ids_.insert(t->token_ids_.end(), tokens_of[i].begin(), tokens_of[i].end());
  }
  return t;
}

std::string TokenTrie::path(std::uint32_t i) const {
  std::string out(nodes_[i].depth, '\0');
  for (std::uint32_t n = i; n != 0; n = nodes_[n].parent) out[nodes_[n].depth - 1] = char(nodes_[n].byte);
  return out;
}

bool TokenTrie::is_end_of_generation(std::int32_t id) const {
  return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id);
}

}  // namespace arbor::model

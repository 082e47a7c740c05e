// Sets of vocabulary tokens (TokenMask) and the vocabulary as a byte trie of token
// pieces (TokenTrie): what constrained decoding walks to find the tokens a grammar
// allows next.
//
// Contract
// - A TokenTrie holds the tokens that may appear inside generated text: every token
//   whose type is normal, byte, user-defined or undefined and whose piece
//   (Tokenizer::token_to_piece, raw bytes) is non-empty. Control, unknown and unused
//   tokens (<|im_start|>, <unk>, ...) are never in it. End-of-generation ids are kept
//   apart (end_of_generation_ids()): a constraint allows them only when the document
//   is complete.
// - Trie nodes: 0 is the root (empty prefix); a node's tokens are those whose piece
//   ends exactly there. Children are linked as siblings, in increasing byte order.
// - Immutable after build(); shared between sequences and threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer.hpp"

namespace arbor::model {

// The words of a token mask: bit t % 64 of word t / 64 allows token t.
inline std::size_t token_mask_words(std::int32_t vocab_size) { return (std::size_t(vocab_size) + 63) / 64; }

// Sets the logits of the tokens `words` does not allow to -infinity (tokens past the
// words' end too).
void apply_token_mask(std::span<const std::uint64_t> words, std::span<float> logits);

class TokenMask {
 public:
  TokenMask() = default;
  explicit TokenMask(std::int32_t vocab_size) { resize(vocab_size); }

  void resize(std::int32_t vocab_size) {
    size_ = vocab_size;
    words_.assign(token_mask_words(vocab_size), 0);
  }
  void clear() { std::fill(words_.begin(), words_.end(), 0); }
  void allow(std::int32_t id) { words_[std::size_t(id) >> 6] |= 1ull << (id & 63); }
  bool allows(std::int32_t id) const {
    return id >= 0 && id < size_ && (words_[std::size_t(id) >> 6] >> (id & 63)) & 1;
  }
  void unite(const TokenMask& other) {
    for (std::size_t i = 0; i < words_.size(); ++i) words_[i] |= other.words_[i];
  }
  std::int32_t size() const { return size_; }
  std::int32_t count() const;
  std::vector<std::int32_t> ids() const;
  // Sets the logits of disallowed tokens to -infinity. logits.size() == size().
  void apply(std::span<float> logits) const { apply_token_mask(words_, logits); }
  std::span<const std::uint64_t> words() const { return words_; }
  bool operator==(const TokenMask&) const = default;

 private:
  std::int32_t size_ = 0;
  std::vector<std::uint64_t> words_;
};

class TokenTrie {
 public:
  struct Node {
    std::uint32_t first_child = 0;   // 0: none (the root is never a child)
    std::uint32_t next_sibling = 0;  // 0: none
    std::uint32_t parent = 0;
    std::uint32_t first_token = 0, num_tokens = 0;  // into token_ids()
    std::uint16_t depth = 0;
    std::uint8_t byte = 0;
  };

  static std::shared_ptr<const TokenTrie> build(const Tokenizer& tokenizer);

  std::int32_t vocab_size() const { return vocab_size_; }
  const Node& node(std::uint32_t i) const { return nodes_[i]; }
  std::size_t num_nodes() const { return nodes_.size(); }
  std::span<const std::int32_t> tokens_at(std::uint32_t i) const {
    return {token_ids_.data() + nodes_[i].first_token, nodes_[i].num_tokens};
  }
  // The bytes from the root to node i.
  std::string path(std::uint32_t i) const;
  // Raw bytes of a token that may appear in text; empty for special tokens.
  std::string_view piece(std::int32_t id) const {
    return id >= 0 && id < vocab_size_ ? std::string_view(pieces_[std::size_t(id)]) : std::string_view();
  }
  bool is_end_of_generation(std::int32_t id) const;
  const std::vector<std::int32_t>& end_of_generation_ids() const { return eog_ids_; }
  std::size_t max_piece_bytes() const { return max_piece_bytes_; }
  std::int32_t num_text_tokens() const { return std::int32_t(token_ids_.size()); }

 private:
  std::int32_t vocab_size_ = 0;
  std::vector<Node> nodes_;
  std::vector<std::int32_t> token_ids_;
  std::vector<std::string> pieces_;  // per id; empty when not a text token
  std::vector<std::int32_t> eog_ids_;
  std::size_t max_piece_bytes_ = 0;
};

}  // namespace arbor::model

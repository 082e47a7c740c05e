// Byte-level BPE (GPT-2 style, tokenizer.ggml.model = "gpt2"): pre-tokenize, map each
// word's bytes to GPT-2's printable code points, then apply merges lowest rank first.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "model/bpe_pretokenizer.hpp"
#include "model/tokenizer.hpp"

namespace arbor::model {

class BpeTokenizer final : public Tokenizer {
 public:
  // Reads tokenizer.ggml.merges from `file`. unsupported for an unknown pre-tokenizer.
  static Result<std::unique_ptr<Tokenizer>> create(Vocabulary vocab, const GgufFile& file);

  std::string token_to_piece(std::int32_t id) const override;

 protected:
  void encode_text(std::string_view text, std::vector<std::int32_t>& out) const override;

 private:
  BpeTokenizer(Vocabulary vocab, PreTokenizer pre, std::vector<std::string> merges);
  void encode_word(std::string_view word, std::vector<std::int32_t>& out) const;
  int merge_rank(std::string_view left, std::string_view right) const;

  PreTokenizer pre_;
  // "left right" -> rank (index in tokenizer.ggml.merges).
  std::unordered_map<std::string, int, GgufStringHash, std::equal_to<>> merge_ranks_;
};

}  // namespace arbor::model

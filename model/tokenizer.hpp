// Tokenizers behind one interface: byte-level BPE (tokenizer.ggml.model = "gpt2") and
// SentencePiece (tokenizer.ggml.model = "llama"), both built from a GGUF vocabulary.
//
// Contract:
// - encode() never adds BOS/EOS; callers prepend bos_id() when add_bos() is true.
// - Special tokens: user-defined tokens (type 4) are always matched in text as single
//   tokens; control tokens (type 3) only when parse_special is true (so untrusted text
//   cannot inject "<|im_start|>"). This is llama.cpp's behaviour.
// - decode(encode(text, false)) == text for any valid UTF-8 text.
// - token_to_piece() returns raw bytes, which may be an incomplete UTF-8 sequence (a
//   byte-fallback or byte-level token); concatenate pieces before displaying them.
// - A Tokenizer is immutable after construction: all methods are const and safe to call
//   from several threads. encode is O(n log n) in the text length.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.hpp"
#include "model/gguf.hpp"

namespace arbor::model {

// GGUF token types (tokenizer.ggml.token_type); values are the file's codes.
enum class TokenType : std::uint8_t {
  undefined = 0, normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6,
};

struct Vocabulary {
  std::vector<std::string> tokens;  // as stored: GPT-2 byte-mapped or SentencePiece '▁' form
  std::vector<float> scores;        // empty when the file has none
  std::vector<TokenType> types;
  std::int32_t bos_id = -1, eos_id = -1, eot_id = -1, unk_id = -1, pad_id = -1;
  bool add_bos = false;
  bool add_space_prefix = true;  // SentencePiece's dummy prefix
  std::string model;             // tokenizer.ggml.model
  std::string pre;               // tokenizer.ggml.pre
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Reads tokenizer.ggml.* from `file`. unsupported for an unknown tokenizer model or
  // pre-tokenizer; corrupt_data for inconsistent arrays or out-of-range special ids.
  static Result<std::unique_ptr<Tokenizer>> from_gguf(const GgufFile& file);

  std::vector<std::int32_t> encode(std::string_view text, bool parse_special) const;
  // As encode(text, true), except that control tokens overlapping a byte range in
  // `literal_ranges` ([begin, end) pairs) stay plain text there. Chat templates use it so
  // that message content cannot inject control tokens while the template's markers do.
  std::vector<std::int32_t> encode(std::string_view text,
                                   std::span<const std::pair<std::size_t, std::size_t>> literal_ranges) const;
  // Concatenated pieces. Control/unknown tokens render as their text when
  // render_special, else as nothing. SentencePiece drops the dummy-prefix space of the
  // first piece (as llama.cpp's detokenizer does).
  std::string decode(std::span<const std::int32_t> ids, bool render_special = true) const;
  // Raw bytes of one token (control tokens: their text). Empty for an out-of-range id.
  virtual std::string token_to_piece(std::int32_t id) const = 0;

  std::int32_t vocab_size() const { return std::int32_t(vocab_.tokens.size()); }
  std::int32_t bos_id() const { return vocab_.bos_id; }
  std::int32_t eos_id() const { return vocab_.eos_id; }
  std::int32_t eot_id() const { return vocab_.eot_id; }  // -1 when the vocabulary has none
  bool add_bos() const { return vocab_.add_bos; }
  // eos, eot, and the usual end-of-turn control tokens (<|im_end|>, <|eot_id|>,
  // <|endoftext|>, <|end|>, </s>, <end_of_turn>) found in the vocabulary.
  bool is_end_of_generation(std::int32_t id) const;
  const std::vector<std::int32_t>& end_of_generation_ids() const { return eog_ids_; }

  TokenType token_type(std::int32_t id) const;
  const std::string& token_text(std::int32_t id) const;  // vocabulary string as stored
  std::optional<std::int32_t> token_id(std::string_view token_text) const;
  const Vocabulary& vocabulary() const { return vocab_; }

 protected:
  explicit Tokenizer(Vocabulary vocab);
  // Encodes one run of plain text (no special tokens in it) and appends the ids.
  virtual void encode_text(std::string_view text, std::vector<std::int32_t>& out) const = 0;
  // Decoding hook: strips SentencePiece's dummy-prefix space from the first piece.
  virtual bool strips_leading_space() const { return false; }

  Vocabulary vocab_;
  std::unordered_map<std::string, std::int32_t, GgufStringHash, std::equal_to<>> token_ids_;

 private:
  struct Special {
    std::string text;
    std::int32_t id;
    bool always;  // user-defined: matched even when parse_special is false
  };
  std::vector<std::int32_t> encode_impl(std::string_view text, bool parse_special,
                                        std::span<const std::pair<std::size_t, std::size_t>> literal) const;
  std::vector<Special> specials_;  // longest text first
  std::vector<std::int32_t> eog_ids_;
};

}  // namespace arbor::model

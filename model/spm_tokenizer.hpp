// SentencePiece vocabularies (tokenizer.ggml.model = "llama") through libsentencepiece:
// the GGUF vocabulary is turned into a serialized ModelProto (BPE, byte fallback,
// identity normalizer, dummy prefix per tokenizer.ggml.add_space_prefix) and loaded
// with LoadFromSerializedProto. Decoding is done here (it needs no model).
#pragma once

#include <memory>
#include <string>

#include "model/tokenizer.hpp"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace arbor::model {

class SpmTokenizer final : public Tokenizer {
 public:
  // corrupt_data when libsentencepiece rejects the vocabulary (message included).
  static Result<std::unique_ptr<Tokenizer>> create(Vocabulary vocab);
  ~SpmTokenizer() override;

  std::string token_to_piece(std::int32_t id) const override;

 protected:
  void encode_text(std::string_view text, std::vector<std::int32_t>& out) const override;
  bool strips_leading_space() const override { return vocab_.add_space_prefix; }

 private:
  explicit SpmTokenizer(Vocabulary vocab);
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

// The serialized sentencepiece ModelProto for `vocab` (exposed for tests).
std::string build_sentencepiece_model_proto(const Vocabulary& vocab);

}  // namespace arbor::model

#include "model/spm_tokenizer.hpp"

#include <sentencepiece_processor.h>

#include <cstring>

#include "model/gguf_format.hpp"

namespace arbor::model {

namespace {

// Protocol-buffer wire encoding, just what ModelProto needs.
class ProtoWriter {
 public:
  void varint(std::uint64_t v) {
    while (v >= 0x80) {
      out_ += char((v & 0x7F) | 0x80);
      v >>= 7;
    }
    out_ += char(v);
  }
  void tag(int field, int wire_type) { varint(std::uint64_t(field) << 3 | std::uint64_t(wire_type)); }
  void int_field(int field, std::int64_t v) {  // int32/enum/bool: negative as 10 bytes
    tag(field, 0);
    varint(std::uint64_t(v));
  }
  void float_field(int field, float v) {
    tag(field, 5);
    char b[4];
    std::memcpy(b, &v, 4);
    out_.append(b, 4);
  }
  void bytes_field(int field, std::string_view v) {
    tag(field, 2);
    varint(v.size());
    out_.append(v);
  }
  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

// SentencePiece piece types equal GGUF token types, except that exactly one piece may
// be UNKNOWN (the unk id): other "unknown" tokens (padding placeholders) become UNUSED.
int piece_type(const Vocabulary& v, std::size_t i) {
  if (std::int32_t(i) == v.unk_id) return 2;
  const auto t = static_cast<int>(v.types[i]);
  if (t == 2 || t == 0) return t == 2 ? 5 : 1;
  return t;
}

// The token text for `id` with SentencePiece's '▁' turned back into spaces.
std::string unescape_whitespace(const std::string& text) {
  static constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    if (text.compare(i, kSpace.size(), kSpace) == 0) {
      out += ' ';
      i += kSpace.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

std::string build_sentencepiece_model_proto(const Vocabulary& v) {
  ProtoWriter model;
  bool has_unk = false;
  for (std::size_t i = 0; i < v.tokens.size(); ++i) {
    ProtoWriter piece;
    piece.bytes_field(1, v.tokens[i]);
    piece.float_field(2, v.scores.empty() ? 0.0f : v.scores[i]);
    const int type = piece_type(v, i);
    has_unk = has_unk || type == 2;
    piece.int_field(3, type);
    model.bytes_field(1, piece.str());
  }
  ProtoWriter trainer;
  trainer.int_field(3, 2);  // model_type = BPE
  trainer.int_field(4, std::int64_t(v.tokens.size()));
  trainer.int_field(35, 1);  // byte_fallback
  trainer.int_field(40, has_unk ? v.unk_id : 0);
  trainer.int_field(41, v.bos_id);
  trainer.int_field(42, v.eos_id);
  trainer.int_field(43, -1);  // pad_id: padding is not SentencePiece's concern here
  model.bytes_field(2, trainer.str());
  ProtoWriter normalizer;
  normalizer.bytes_field(1, "identity");
  normalizer.int_field(3, v.add_space_prefix ? 1 : 0);
  normalizer.int_field(4, 0);  // remove_extra_whitespaces
  normalizer.int_field(5, 1);  // escape_whitespaces
  model.bytes_field(3, normalizer.str());
  return model.str();
}

SpmTokenizer::SpmTokenizer(Vocabulary vocab)
    : Tokenizer(std::move(vocab)), processor_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}

SpmTokenizer::~SpmTokenizer() = default;

Result<std::unique_ptr<Tokenizer>> SpmTokenizer::create(Vocabulary vocab) {
  if (!vocab.scores.empty() && vocab.scores.size() != vocab.tokens.size())
    return fail(ErrorCode::corrupt_data, "SentencePiece vocabulary: scores and tokens differ in length");
  std::unique_ptr<SpmTokenizer> t(new SpmTokenizer(std::move(vocab)));
  if (t->vocab_.unk_id < 0) {
    for (std::size_t i = 0; i < t->vocab_.types.size(); ++i)
      if (t->vocab_.types[i] == TokenType::unknown) {
        t->vocab_.unk_id = std::int32_t(i);
        break;
      }
  }
  const std::string proto = build_sentencepiece_model_proto(t->vocab_);
  const auto status = t->processor_->LoadFromSerializedProto(proto);
  if (!status.ok())
    return fail(ErrorCode::corrupt_data,
                format("libsentencepiece rejected the GGUF vocabulary: {}", status.ToString()));
  return std::unique_ptr<Tokenizer>(std::move(t));
}

void SpmTokenizer::encode_text(std::string_view text, std::vector<std::int32_t>& out) const {
  std::vector<int> ids;
  // Encode only fails on an unloaded model, which create() rules out.
  if (!processor_->Encode(text, &ids).ok()) return;
  out.insert(out.end(), ids.begin(), ids.end());
}

std::string SpmTokenizer::token_to_piece(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  const std::string& text = vocab_.tokens[id];
  switch (vocab_.types[id]) {
    case TokenType::byte:
      // "<0xAB>"
      if (text.size() == 6 && hex_digit(text[3]) >= 0 && hex_digit(text[4]) >= 0)
        return std::string(1, char(hex_digit(text[3]) * 16 + hex_digit(text[4])));
      return text;
    case TokenType::control:
    case TokenType::unknown:
      return text;
    default:
      return unescape_whitespace(text);
  }
}

}  // namespace arbor::model

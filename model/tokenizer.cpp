#include "model/tokenizer.hpp"

#include <algorithm>

#include "model/bpe_tokenizer.hpp"
#include "model/gguf_format.hpp"
#include "model/spm_tokenizer.hpp"

namespace arbor::model {

namespace {

std::unexpected<Error> corrupt(const GgufFile& f, const std::string& what) {
  return fail(ErrorCode::corrupt_data,
              format("GGUF file '{}': {}; re-convert the model", f.source_name(), what));
}

// Reads an optional special-token id; -1 when absent.
Result<std::int32_t> read_id(const GgufFile& f, const char* key, std::size_t vocab_size) {
  auto v = f.get_int_or(key, -1);
  if (!v) return std::unexpected(v.error());
  if (*v < -1 || *v >= std::int64_t(vocab_size))
    return corrupt(f, format("{} = {} is outside the vocabulary of {} tokens", key, *v, vocab_size));
  return std::int32_t(*v);
}

Result<Vocabulary> read_vocabulary(const GgufFile& f) {
  Vocabulary v;
  auto model = f.get_string("tokenizer.ggml.model");
  if (!model) return std::unexpected(model.error());
  v.model = *model;
  auto pre = f.get_string_or("tokenizer.ggml.pre", "default");
  if (!pre) return std::unexpected(pre.error());
  v.pre = *pre;
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (!tokens) return std::unexpected(tokens.error());
  v.tokens = std::move(*tokens);
  if (v.tokens.empty() || v.tokens.size() > (1u << 30)) return corrupt(f, "empty or absurd vocabulary");
  const std::size_t n = v.tokens.size();
  if (f.has("tokenizer.ggml.scores")) {
    auto scores = f.get_float_array("tokenizer.ggml.scores");
    if (!scores) return std::unexpected(scores.error());
    if (scores->size() != n)
      return corrupt(f, format("{} scores for {} tokens", scores->size(), n));
    v.scores = std::move(*scores);
  }
  v.types.assign(n, TokenType::normal);
  if (f.has("tokenizer.ggml.token_type")) {
    auto types = f.get_int_array("tokenizer.ggml.token_type");
    if (!types) return std::unexpected(types.error());
    if (types->size() != n) return corrupt(f, format("{} token types for {} tokens", types->size(), n));
    for (std::size_t i = 0; i < n; ++i) {
      const auto t = (*types)[i];
      if (t < 0 || t > 6) return corrupt(f, format("token {} has unknown type {}", i, t));
      v.types[i] = static_cast<TokenType>(t);
    }
  }
  for (auto [key, dst] : {std::pair{"tokenizer.ggml.bos_token_id", &v.bos_id},
                          std::pair{"tokenizer.ggml.eos_token_id", &v.eos_id},
                          std::pair{"tokenizer.ggml.eot_token_id", &v.eot_id},
                          std::pair{"tokenizer.ggml.unknown_token_id", &v.unk_id},
                          std::pair{"tokenizer.ggml.padding_token_id", &v.pad_id}}) {
    auto id = read_id(f, key, n);
    if (!id) return std::unexpected(id.error());
    *dst = *id;
  }
  const bool spm = v.model == "llama";
  auto add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", spm);
  if (!add_bos) return std::unexpected(add_bos.error());
  v.add_bos = *add_bos && v.bos_id >= 0;
  auto prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", spm);
  if (!prefix) return std::unexpected(prefix.error());
  v.add_space_prefix = *prefix;
  return v;
}

}  // namespace

Tokenizer::Tokenizer(Vocabulary vocab) : vocab_(std::move(vocab)) {
  token_ids_.reserve(vocab_.tokens.size());
  for (std::size_t i = 0; i < vocab_.tokens.size(); ++i)
    token_ids_.insert_or_assign(vocab_.tokens[i], std::int32_t(i));
  for (std::size_t i = 0; i < vocab_.tokens.size(); ++i) {
    const TokenType t = vocab_.types[i];
    if ((t == TokenType::control || t == TokenType::user_defined) && !vocab_.tokens[i].empty())
      specials_.push_back({vocab_.tokens[i], std::int32_t(i), t == TokenType::user_defined});
  }
  std::stable_sort(specials_.begin(), specials_.end(),
                   [](const Special& a, const Special& b) { return a.text.size() > b.text.size(); });

  auto add_eog = [&](std::int32_t id) {
    if (id >= 0 && std::find(eog_ids_.begin(), eog_ids_.end(), id) == eog_ids_.end())
      eog_ids_.push_back(id);
  };
  add_eog(vocab_.eos_id);
  add_eog(vocab_.eot_id);
  for (const char* name : {"<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end|>", "</s>",
                           "<end_of_turn>", "<|eom_id|>"}) {
    auto it = token_ids_.find(std::string_view(name));
    if (it != token_ids_.end() && vocab_.types[it->second] != TokenType::normal) add_eog(it->second);
  }
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::from_gguf(const GgufFile& file) {
  auto vocab = read_vocabulary(file);
  if (!vocab) return std::unexpected(vocab.error());
  if (vocab->model == "gpt2") return BpeTokenizer::create(std::move(*vocab), file);
  if (vocab->model == "llama") return SpmTokenizer::create(std::move(*vocab));
  return fail(ErrorCode::unsupported,
              format("GGUF file '{}': tokenizer.ggml.model '{}' is not supported (Arbor handles "
                     "'gpt2' byte-level BPE and 'llama' SentencePiece)", file.source_name(), vocab->model));
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  return encode_impl(text, parse_special, {});
}

std::vector<std::int32_t> Tokenizer::encode(
    std::string_view text, std::span<const std::pair<std::size_t, std::size_t>> literal_ranges) const {
  return encode_impl(text, true, literal_ranges);
}

std::vector<std::int32_t> Tokenizer::encode_impl(
    std::string_view text, bool parse_special,
    std::span<const std::pair<std::size_t, std::size_t>> literal) const {
  auto in_literal = [&](std::size_t begin, std::size_t end) {
    for (const auto& [b, e] : literal)
      if (begin < e && b < end) return true;
    return false;
  };
  // Fragments: raw text ranges or special-token ids. Specials are cut out longest first
  // across the whole text, as llama.cpp does, so "<|a|><|a|b|>" resolves identically.
  struct Fragment {
    std::size_t begin, end;
    std::int32_t id;  // -1: raw text [begin, end)
  };
  std::vector<Fragment> fragments{{0, text.size(), -1}};
  for (const Special& s : specials_) {
    if (!s.always && !parse_special) continue;
    std::vector<Fragment> next;
    next.reserve(fragments.size());
    for (const Fragment& f : fragments) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      std::size_t pos = f.begin, search = f.begin;
      while (search < f.end) {
        const std::size_t hit = text.substr(0, f.end).find(s.text, search);
        if (hit == std::string_view::npos) break;
        if (!s.always && in_literal(hit, hit + s.text.size())) {
          search = hit + 1;
          continue;
        }
        if (hit > pos) next.push_back({pos, hit, -1});
        next.push_back({hit, hit + s.text.size(), s.id});
        pos = search = hit + s.text.size();
      }
      if (pos < f.end) next.push_back({pos, f.end, -1});
    }
    fragments = std::move(next);
  }
  std::vector<std::int32_t> out;
  for (const Fragment& f : fragments) {
    if (f.id >= 0) out.push_back(f.id);
    else if (f.end > f.begin) encode_text(text.substr(f.begin, f.end - f.begin), out);
  }
  return out;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool render_special) const {
  std::string out;
  bool first = true;
  for (std::int32_t id : ids) {
    const TokenType t = token_type(id);
    if (!render_special && (t == TokenType::control || t == TokenType::unknown)) continue;
    std::string piece = token_to_piece(id);
    if (first && strips_leading_space() && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    first = false;
    out += piece;
  }
  return out;
}

bool Tokenizer::is_end_of_generation(std::int32_t id) const {
  return std::find(eog_ids_.begin(), eog_ids_.end(), id) != eog_ids_.end();
}

TokenType Tokenizer::token_type(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) return TokenType::undefined;
  return vocab_.types[id];
}

const std::string& Tokenizer::token_text(std::int32_t id) const {
  static const std::string empty;
  if (id < 0 || id >= vocab_size()) return empty;
  return vocab_.tokens[id];
}

std::optional<std::int32_t> Tokenizer::token_id(std::string_view token_text) const {
  auto it = token_ids_.find(token_text);
  if (it == token_ids_.end()) return std::nullopt;
  return it->second;
}

}  // namespace arbor::model

#include "model/bpe_tokenizer.hpp"

#include <queue>

#include "model/gguf_format.hpp"
#include "model/unicode.hpp"

namespace arbor::model {

Result<std::unique_ptr<Tokenizer>> BpeTokenizer::create(Vocabulary vocab, const GgufFile& file) {
  const auto pre = pre_tokenizer_from_name(vocab.pre);
  if (!pre)
    return fail(ErrorCode::unsupported,
                format("GGUF file '{}': BPE pre-tokenizer '{}' is not supported (known: gpt2/default, "
                       "mpt, smollm, starcoder, refact, llama-bpe, ...)", file.source_name(), vocab.pre));
  auto merges = file.get_string_array("tokenizer.ggml.merges");
  if (!merges) return std::unexpected(merges.error());
  return std::unique_ptr<Tokenizer>(new BpeTokenizer(std::move(vocab), *pre, std::move(*merges)));
}

BpeTokenizer::BpeTokenizer(Vocabulary vocab, PreTokenizer pre, std::vector<std::string> merges)
    : Tokenizer(std::move(vocab)), pre_(pre) {
  merge_ranks_.reserve(merges.size());
  for (std::size_t i = 0; i < merges.size(); ++i)
    merge_ranks_.emplace(std::move(merges[i]), int(i));  // the first occurrence keeps its rank
}

int BpeTokenizer::merge_rank(std::string_view left, std::string_view right) const {
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key.append(left).append(" ").append(right);
  auto it = merge_ranks_.find(key);
  return it == merge_ranks_.end() ? -1 : it->second;
}

void BpeTokenizer::encode_text(std::string_view text, std::vector<std::int32_t>& out) const {
  for (std::string_view word : pre_tokenize(pre_, text)) encode_word(word, out);
}

void BpeTokenizer::encode_word(std::string_view word, std::vector<std::int32_t>& out) const {
  std::string mapped;
  mapped.reserve(word.size() * 2);
  for (char c : word) mapped += unicode::byte_to_unicode_utf8(static_cast<std::uint8_t>(c));
  // Llama-3's tokenizer (ignore_merges) takes a whole word that is a token as is.
  if (pre_ == PreTokenizer::llama3) {
    if (auto it = token_ids_.find(mapped); it != token_ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Symbols are UTF-8 ranges of `mapped` in a doubly linked list; merges come off a
  // min-heap keyed by (rank, left position). Stale entries are skipped on pop.
  struct Symbol {
    int prev, next;
    std::size_t start, len;
  };
  std::vector<Symbol> syms;
  for (std::size_t i = 0; i < mapped.size();) {
    const std::size_t len = unicode::utf8_sequence_length(static_cast<unsigned char>(mapped[i]));
    syms.push_back({int(syms.size()) - 1, int(syms.size()) + 1, i, len});
    i += len;
  }
  syms.back().next = -1;
  struct Bigram {
    int rank, left, right;
    std::size_t size;
    bool operator>(const Bigram& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Bigram, std::vector<Bigram>, std::greater<>> queue;
  auto view = [&](const Symbol& s) { return std::string_view(mapped).substr(s.start, s.len); };
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int rank = merge_rank(view(syms[left]), view(syms[right]));
    if (rank >= 0) queue.push({rank, left, right, syms[left].len + syms[right].len});
  };
  for (int i = 0; i + 1 < int(syms.size()); ++i) try_add(i, i + 1);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = syms[b.left];
    Symbol& r = syms[b.right];
    if (l.len == 0 || r.len == 0 || l.next != b.right || l.len + r.len != b.size) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (int i = 0; i >= 0; i = syms[i].next) {
    const std::string_view piece = view(syms[i]);
    if (auto it = token_ids_.find(piece); it != token_ids_.end()) {
      out.push_back(it->second);
      continue;
    }
    // No token for the merged symbol (an inconsistent vocabulary): fall back to the
    // single byte symbols it is made of, skipping any the vocabulary lacks too.
    for (std::size_t k = 0; k < piece.size();) {
      const std::size_t len = unicode::utf8_sequence_length(static_cast<unsigned char>(piece[k]));
      if (auto it = token_ids_.find(piece.substr(k, len)); it != token_ids_.end())
        out.push_back(it->second);
      else if (vocab_.unk_id >= 0)
        out.push_back(vocab_.unk_id);
      k += len;
    }
  }
}

std::string BpeTokenizer::token_to_piece(std::int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  const std::string& text = vocab_.tokens[id];
  const TokenType type = vocab_.types[id];
  if (type == TokenType::control || type == TokenType::user_defined || type == TokenType::unknown)
    return text;
  std::string out;
  out.reserve(text.size());
  for (const auto& u : unicode::decode_utf8(text)) {
    const int b = unicode::unicode_to_byte(u.cp);
    if (b >= 0) out += char(b);
    else out.append(text, u.offset, u.num_bytes);  // not byte-mapped: keep as is
  }
  return out;
}

}  // namespace arbor::model

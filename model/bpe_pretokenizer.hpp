// Pre-tokenizers for byte-level BPE: split text into words before BPE merges, by the
// rules tokenizer.ggml.pre names. The regexes are hand-coded matchers (no regex engine):
//   gpt2:    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   digits:  \p{N} (each number character alone), then gpt2 inside every piece
//   llama3:  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//            ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Every byte of the input lands in exactly one word, in order.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace arbor::model {

enum class PreTokenizer { gpt2, digits_then_gpt2, llama3 };

// Maps a tokenizer.ggml.pre name to a pre-tokenizer; nullopt when unknown.
std::optional<PreTokenizer> pre_tokenizer_from_name(std::string_view name);

std::vector<std::string_view> pre_tokenize(PreTokenizer kind, std::string_view text);

}  // namespace arbor::model

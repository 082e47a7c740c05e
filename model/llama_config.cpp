#include "model/llama_config.hpp"

#include "model/gguf.hpp"

namespace arbor::model {
namespace {

Result<int> read_positive(const GgufFile& file, const std::string& key) {
  auto v = file.get_int(key);
  if (!v) return fail(v.error().code, v.error().message);
  if (*v <= 0 || *v > (1 << 24))
    return fail(ErrorCode::corrupt_data, file.source_name() + ": metadata '" + key + "' = " +
                                             std::to_string(*v) + " is out of range");
  return int(*v);
}

}  // namespace

Result<LlamaConfig> read_llama_config(const GgufFile& file) {
  LlamaConfig c;
  auto arch = file.get_string("general.architecture");
  if (!arch) return fail(arch.error().code, arch.error().message);
  c.architecture = *arch;
  if (c.architecture != "llama")
    return fail(ErrorCode::unsupported,
                file.source_name() + ": architecture '" + c.architecture +
                    "' is not supported (Arbor runs 'llama' models: Llama 2/3, SmolLM2, "
                    "TinyLlama, Mistral-style GGUF conversions)");
  c.name = file.get_string_or("general.name", "").value_or("");
  const std::string p = "llama.";
  for (auto [field, key] : {std::pair{&c.hidden, "embedding_length"},
                            std::pair{&c.num_layers, "block_count"},
                            std::pair{&c.ffn_dim, "feed_forward_length"},
                            std::pair{&c.num_heads, "attention.head_count"},
                            std::pair{&c.context_length, "context_length"}}) {
    auto v = read_positive(file, p + key);
    if (!v) return std::unexpected(v.error());
    *field = *v;
  }
  auto kv = file.get_int_or(p + "attention.head_count_kv", c.num_heads);
  if (!kv) return std::unexpected(kv.error());
  c.num_kv_heads = int(*kv);
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0)
    return fail(ErrorCode::corrupt_data, file.source_name() + ": head_count_kv " +
                                             std::to_string(c.num_kv_heads) + " does not divide head_count " +
                                             std::to_string(c.num_heads));
  if (c.hidden % c.num_heads != 0)
    return fail(ErrorCode::corrupt_data, file.source_name() + ": embedding_length " +
                                             std::to_string(c.hidden) + " is not a multiple of head_count");
  auto key_len = file.get_int_or(p + "attention.key_length", c.hidden / c.num_heads);
  if (!key_len) return std::unexpected(key_len.error());
  c.head_dim = int(*key_len);
  if (c.head_dim * c.num_heads != c.hidden)
    return fail(ErrorCode::unsupported, file.source_name() + ": attention.key_length " +
                                            std::to_string(c.head_dim) + " x heads != embedding_length");
  auto rope_dim = file.get_int_or(p + "rope.dimension_count", c.head_dim);
  if (!rope_dim) return std::unexpected(rope_dim.error());
  c.rope_dim = int(*rope_dim);
  if (c.rope_dim <= 0 || c.rope_dim > c.head_dim || c.rope_dim % 2 != 0)
    return fail(ErrorCode::corrupt_data, file.source_name() + ": rope.dimension_count " +
                                             std::to_string(c.rope_dim) + " must be even and <= head dim");
  auto theta = file.get_float_or(p + "rope.freq_base", 10000.0);
  if (!theta) return std::unexpected(theta.error());
  c.rope_theta = float(*theta);
  auto eps = file.get_float_or(p + "attention.layer_norm_rms_epsilon", 1e-5);
  if (!eps) return std::unexpected(eps.error());
  c.rms_eps = float(*eps);
  // vocab_size is optional metadata; the embedding tensor is the source of truth.
  if (const auto* embd = file.find_tensor("token_embd.weight"); embd && embd->dims.size() == 2)
    c.vocab_size = int(embd->dims[1]);
  if (c.vocab_size <= 0)
    return fail(ErrorCode::corrupt_data, file.source_name() + ": token_embd.weight is missing or not 2-D");
  return c;
}

}  // namespace arbor::model

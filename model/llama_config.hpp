// The hyper-parameters of a Llama-family model, read from GGUF `llama.*` metadata.
#pragma once

#include <string>

#include "common/result.hpp"

namespace arbor::model {

class GgufFile;

struct LlamaConfig {
  std::string architecture;  // "llama"
  std::string name;          // general.name, for display
  int vocab_size = 0;
  int hidden = 0;            // embedding_length
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;          // hidden / num_heads unless attention.key_length says otherwise
  int ffn_dim = 0;
  int rope_dim = 0;          // rotated dimensions per head (usually head_dim)
  int context_length = 0;
  float rope_theta = 10000.f;
  float rms_eps = 1e-5f;

  int group_size() const { return num_heads / num_kv_heads; }  // query heads per KV head
};

// Reads and checks the config: unsupported architecture, missing keys and
// inconsistent shapes (heads not dividing hidden, kv heads not dividing heads, odd
// rope dims) give errors naming the key and the file.
Result<LlamaConfig> read_llama_config(const GgufFile& file);

}  // namespace arbor::model

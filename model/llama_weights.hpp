// Views of a Llama model's tensors inside a mapped GGUF file, checked against the
// config (names, shapes, supported types). Matrices stay in their stored type.
#pragma once

#include <vector>

#include "common/result.hpp"
#include "kernels/weight_matrix.hpp"
#include "model/llama_config.hpp"

namespace arbor::model {

class GgufFile;

struct LlamaLayerWeights {
  const float* attn_norm = nullptr;  // [hidden]
  kernels::WeightMatrix wq, wk, wv, wo;
  const float* ffn_norm = nullptr;   // [hidden]
  kernels::WeightMatrix gate, up, down;
};

struct LlamaWeights {
  kernels::WeightMatrix token_embd;  // [vocab][hidden]
  std::vector<LlamaLayerWeights> layers;
  const float* output_norm = nullptr;
  kernels::WeightMatrix output;      // [vocab][hidden]; token_embd when tied
  bool tied_output = false;
  // Norm vectors stored as F16/BF16 in the file are converted into here.
  std::vector<std::vector<float>> owned_;
};

// Binds every tensor; errors name the tensor, its expected and actual shape or type.
// The returned views point into `file`, which must outlive them.
Result<LlamaWeights> bind_llama_weights(const GgufFile& file, const LlamaConfig& config);

}  // namespace arbor::model

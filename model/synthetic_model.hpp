// Random-weight Llama models in the shape of real ones, written with the project's GGUF
// writer: for benchmarks and cross-backend tests where real weights cannot travel (a
// device machine gets no model files). The weights are random but scaled so activations
// stay O(1) through every layer; the vocabulary is byte-level BPE (256 byte tokens, an
// end-of-text token, fillers) so Model::load accepts the file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.hpp"
#include "kernels/ggml_types.hpp"
#include "model/gguf_writer.hpp"

namespace arbor::model {

struct SyntheticShape {
  std::string name;
  int vocab = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, ffn = 0, context = 0;
  float rope_theta = 10000.f;
};

// "smollm2-135m" (SmolLM2-135M: 49152 x 576, 30 layers, 9/3 heads) or "llama3-8b"
// (Llama-3-8B: 128256 x 4096, 32 layers, 32/8 heads, ffn 14336); not_found otherwise.
Result<SyntheticShape> synthetic_shape(std::string_view name);

// The model as a writer (serialize() or write_file() it). Matrices in `type` (Q4_0,
// Q4_1, Q8_0, F16 or F32); norms F32; `seed` fixes every byte. invalid_argument for
// another type or a shape whose dims do not fit the type's blocks.
Result<GgufWriter> synthetic_llama(const SyntheticShape& shape, kernels::GgmlType type, std::uint64_t seed);

}  // namespace arbor::model

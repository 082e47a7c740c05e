#include "model/llama_weights.hpp"

#include <string>

#include "kernels/cpu/dequantize.hpp"
#include "model/gguf.hpp"

namespace arbor::model {
namespace {

using kernels::GgmlType;

std::string dims_text(const std::vector<std::int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// A matrix [rows][cols] is stored with dims {cols, rows} (dims[0] innermost).
Result<kernels::WeightMatrix> bind_matrix(const GgufFile& file, const std::string& name,
                                          std::int64_t rows, std::int64_t cols) {
  auto t = file.tensor(name);
  if (!t) return std::unexpected(t.error());
  const GgufTensor& tensor = **t;
  if (tensor.dims.size() != 2 || tensor.dims[0] != cols || tensor.dims[1] != rows)
    return fail(ErrorCode::corrupt_data, file.source_name() + ": tensor '" + name + "' has shape " +
                                             dims_text(tensor.dims) + ", expected [" +
                                             std::to_string(cols) + ", " + std::to_string(rows) + "]");
  if (!kernels::is_supported(tensor.type))
    return fail(ErrorCode::unsupported, file.source_name() + ": tensor '" + name + "' has type " +
                                            kernels::type_name(tensor.type) + ", which Arbor cannot multiply");
  return kernels::WeightMatrix{tensor.type, tensor.data, rows, cols};
}

Result<const float*> bind_vector(const GgufFile& file, const std::string& name, std::int64_t n,
                                 LlamaWeights& weights) {
  auto t = file.tensor(name);
  if (!t) return std::unexpected(t.error());
  const GgufTensor& tensor = **t;
  if (tensor.dims.size() != 1 || tensor.dims[0] != n)
    return fail(ErrorCode::corrupt_data, file.source_name() + ": tensor '" + name + "' has shape " +
                                             dims_text(tensor.dims) + ", expected [" + std::to_string(n) + "]");
  if (tensor.type == GgmlType::F32) return reinterpret_cast<const float*>(tensor.data);
  if (tensor.type != GgmlType::F16 && tensor.type != GgmlType::BF16)
    return fail(ErrorCode::unsupported, file.source_name() + ": norm tensor '" + name + "' has type " +
                                            kernels::type_name(tensor.type) + " (expected F32, F16 or BF16)");
  auto& copy = weights.owned_.emplace_back(std::size_t(n));
  kernels::cpu::dequantize_row(tensor.type, tensor.data, copy.data(), n);
  return copy.data();
}

}  // namespace

Result<LlamaWeights> bind_llama_weights(const GgufFile& file, const LlamaConfig& c) {
  LlamaWeights w;
  w.owned_.reserve(2 * c.num_layers + 1);  // pointers into owned_ vectors must stay valid
  const std::int64_t kv_dim = std::int64_t(c.num_kv_heads) * c.head_dim;
  auto embd = bind_matrix(file, "token_embd.weight", c.vocab_size, c.hidden);
  if (!embd) return std::unexpected(embd.error());
  w.token_embd = *embd;
  w.tied_output = file.find_tensor("output.weight") == nullptr;
  if (w.tied_output) {
    w.output = w.token_embd;
  } else {
    auto out = bind_matrix(file, "output.weight", c.vocab_size, c.hidden);
    if (!out) return std::unexpected(out.error());
    w.output = *out;
  }
  auto norm = bind_vector(file, "output_norm.weight", c.hidden, w);
  if (!norm) return std::unexpected(norm.error());
  w.output_norm = *norm;

  w.layers.resize(std::size_t(c.num_layers));
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LlamaLayerWeights& L = w.layers[std::size_t(l)];
    struct MatrixSpec { kernels::WeightMatrix* dst; const char* name; std::int64_t rows, cols; };
    const MatrixSpec matrices[] = {
        {&L.wq, "attn_q.weight", c.hidden, c.hidden},    {&L.wk, "attn_k.weight", kv_dim, c.hidden},
        {&L.wv, "attn_v.weight", kv_dim, c.hidden},      {&L.wo, "attn_output.weight", c.hidden, c.hidden},
        {&L.gate, "ffn_gate.weight", c.ffn_dim, c.hidden}, {&L.up, "ffn_up.weight", c.ffn_dim, c.hidden},
        {&L.down, "ffn_down.weight", c.hidden, c.ffn_dim},
    };
    for (const auto& m : matrices) {
      auto bound = bind_matrix(file, p + m.name, m.rows, m.cols);
      if (!bound) return std::unexpected(bound.error());
      *m.dst = *bound;
    }
    auto an = bind_vector(file, p + "attn_norm.weight", c.hidden, w);
    if (!an) return std::unexpected(an.error());
    L.attn_norm = *an;
    auto fn = bind_vector(file, p + "ffn_norm.weight", c.hidden, w);
    if (!fn) return std::unexpected(fn.error());
    L.ffn_norm = *fn;
  }
  return w;
}

}  // namespace arbor::model

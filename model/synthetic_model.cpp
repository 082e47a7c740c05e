#include "model/synthetic_model.hpp"

#include <cmath>
#include <cstring>
#include <vector>

#include "model/unicode.hpp"

namespace arbor::model {
namespace {

using kernels::GgmlType;

// xorshift64*: fast enough to fill gigabytes of weights in seconds, and reproducible.
struct Rng {
  std::uint64_t s;
  explicit Rng(std::uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  std::uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1Dull;
  }
  float uniform() { return float(next() >> 40) * (1.f / 16777216.f); }  // [0, 1)
  float normal() {  // sum of four uniforms: mean 0, variance 1, enough for weights
    return (uniform() + uniform() + uniform() + uniform() - 2.f) * 1.7320508f;
  }
};

void put_u16(std::byte* p, std::uint16_t v) { std::memcpy(p, &v, 2); }

// rows x cols values of standard deviation `stddev` in `type`. Quantized blocks get
// random quants and the scale that gives that deviation (uniform 4-bit quants have a
// deviation of 4.6 steps, uniform int8 ones 74).
std::vector<std::byte> random_matrix(Rng& rng, GgmlType type, std::int64_t rows, std::int64_t cols, float stddev) {
  const std::size_t bytes = kernels::row_bytes(type, cols) * std::size_t(rows);
  std::vector<std::byte> data(bytes);
  const std::size_t n = std::size_t(rows * cols);
  if (type == GgmlType::F32 || type == GgmlType::F16) {
    for (std::size_t i = 0; i < n; ++i) {
      const float v = stddev * rng.normal();
      if (type == GgmlType::F32)
        std::memcpy(&data[i * 4], &v, 4);
      else
        put_u16(&data[i * 2], kernels::fp32_to_fp16_scalar(v));
    }
    return data;
  }
  for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
    const std::uint64_t r = rng.next();
    std::memcpy(&data[i], &r, 8);
  }
  const kernels::BlockShape shape = kernels::block_shape(type);
  const float d = stddev / (type == GgmlType::Q8_0 ? 74.f : 4.6f);
  for (std::size_t b = 0; b < bytes / std::size_t(shape.bytes); ++b) {
    std::byte* block = &data[b * std::size_t(shape.bytes)];
    put_u16(block, kernels::fp32_to_fp16_scalar(d * (0.75f + 0.5f * rng.uniform())));
    if (type == GgmlType::Q4_1) put_u16(block + 2, kernels::fp32_to_fp16_scalar(-8.f * d));
  }
  return data;
}

void add_vocabulary(GgufWriter& w, int vocab) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(unicode::byte_to_unicode_utf8(std::uint8_t(b)));
  tokens.push_back("<|endoftext|>");
  while (int(tokens.size()) < vocab) tokens.push_back("<|synthetic_" + std::to_string(tokens.size()) + "|>");
  tokens.resize(std::size_t(vocab));
  std::vector<std::int32_t> types(tokens.size(), 5);  // fillers: unused
  for (std::size_t i = 0; i < 256 && i < types.size(); ++i) types[i] = 1;  // bytes: normal
  types[256] = 3;                                                          // end of text: control
  w.set_string("tokenizer.ggml.model", "gpt2");
  w.set_string("tokenizer.ggml.pre", "gpt2");
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  w.set("tokenizer.ggml.merges", GgufValue::string_array({}));
  w.set_u32("tokenizer.ggml.eos_token_id", 256);
  w.set_u32("tokenizer.ggml.bos_token_id", 256);
}

}  // namespace

Result<SyntheticShape> synthetic_shape(std::string_view name) {
  if (name == "smollm2-135m") return SyntheticShape{"smollm2-135m", 49152, 576, 30, 9, 3, 1536, 8192, 100000.f};
  if (name == "llama3-8b") return SyntheticShape{"llama3-8b", 128256, 4096, 32, 32, 8, 14336, 8192, 500000.f};
  return fail(ErrorCode::not_found, "unknown synthetic shape '" + std::string(name) + "' (smollm2-135m, llama3-8b)");
}

Result<GgufWriter> synthetic_llama(const SyntheticShape& s, GgmlType type, std::uint64_t seed) {
  if (type != GgmlType::Q4_0 && type != GgmlType::Q4_1 && type != GgmlType::Q8_0 && type != GgmlType::F16 &&
      type != GgmlType::F32)
    return fail(ErrorCode::invalid_argument, std::string("synthetic models take Q4_0, Q4_1, Q8_0, F16 or F32, not ") +
                                                 kernels::type_name(type));
  if (s.vocab <= 256 || s.layers <= 0 || s.heads <= 0 || s.kv_heads <= 0 || s.heads % s.kv_heads != 0 ||
      s.hidden % s.heads != 0)
    return fail(ErrorCode::invalid_argument, "synthetic shape '" + s.name + "' is not a valid Llama shape");
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "synthetic-" + s.name);
  w.set_u32("llama.context_length", std::uint32_t(s.context));
  w.set_u32("llama.embedding_length", std::uint32_t(s.hidden));
  w.set_u32("llama.block_count", std::uint32_t(s.layers));
  w.set_u32("llama.feed_forward_length", std::uint32_t(s.ffn));
  w.set_u32("llama.attention.head_count", std::uint32_t(s.heads));
  w.set_u32("llama.attention.head_count_kv", std::uint32_t(s.kv_heads));
  w.set_f32("llama.rope.freq_base", s.rope_theta);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  add_vocabulary(w, s.vocab);

  Rng rng(seed);
  Result<void> ok;
  auto matrix = [&](const std::string& name, std::int64_t rows, std::int64_t cols, float stddev) {
    if (!ok) return;
    const auto data = random_matrix(rng, type, rows, cols, stddev);
    ok = w.add_tensor(name, type, {cols, rows}, data);
  };
  auto norm = [&](const std::string& name) {
    if (!ok) return;
    std::vector<float> v(std::size_t(s.hidden));
    for (auto& x : v) x = 1.f + 0.1f * rng.normal();
    ok = w.add_f32_tensor(name, {s.hidden}, v);
  };
  const std::int64_t kv_dim = std::int64_t(s.hidden / s.heads) * s.kv_heads;
  const float in_scale = 1.f / std::sqrt(float(s.hidden));
  matrix("token_embd.weight", s.vocab, s.hidden, 1.f);
  norm("output_norm.weight");
  matrix("output.weight", s.vocab, s.hidden, in_scale);
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    norm(p + "attn_norm.weight");
    matrix(p + "attn_q.weight", s.hidden, s.hidden, in_scale);
    matrix(p + "attn_k.weight", kv_dim, s.hidden, in_scale);
    matrix(p + "attn_v.weight", kv_dim, s.hidden, in_scale);
    matrix(p + "attn_output.weight", s.hidden, s.hidden, in_scale);
    norm(p + "ffn_norm.weight");
    matrix(p + "ffn_gate.weight", s.ffn, s.hidden, in_scale);
    matrix(p + "ffn_up.weight", s.ffn, s.hidden, in_scale);
    matrix(p + "ffn_down.weight", s.hidden, s.ffn, 1.f / std::sqrt(float(s.ffn)));
  }
  if (!ok) return std::unexpected(ok.error());
  return w;
}

}  // namespace arbor::model
